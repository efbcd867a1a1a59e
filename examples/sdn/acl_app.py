#!/usr/bin/env python3
"""An ordinary os-ken app for a two-table OpenFlow 1.3 switch: an ACL in
table 0 and a MAC table in table 1 (nflab's ACL use case, docs/sdn.md).

It knows nothing of nflab's proxy: it installs N ACL rules (source address
198.18.1.i: allowed -> GOTO_TABLE 1, or denied -> no instructions, a drop)
and M MAC rules (destination 02:00:00:00:hi:lo -> OUTPUT to port 2) on the
switch that connects, then a barrier, and prints "installed N M" once the
barrier reply is back.

Run: python3 acl_app.py --ofp-listen-host 127.0.0.1 --ofp-tcp-listen-port 6633
with NFLAB_ACL_N and NFLAB_ACL_M in the environment.
"""
import os
import sys

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3


def allowed(i):
    """The ACL's verdict for source i (every third source is denied)."""
    return i % 3 != 2


def mac(j):
    return "02:00:00:00:%02x:%02x" % (j >> 8, j & 0xFF)


class AclApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        ofp, p = dp.ofproto, dp.ofproto_parser
        n = int(os.environ.get("NFLAB_ACL_N", "10"))
        m = int(os.environ.get("NFLAB_ACL_M", "10"))
        for i in range(n):
            match = p.OFPMatch(eth_type=0x0800, ipv4_src="198.18.1.%d" % i)
            inst = [p.OFPInstructionGotoTable(1)] if allowed(i) else []
            dp.send_msg(p.OFPFlowMod(dp, table_id=0, priority=100, match=match,
                                     instructions=inst))
        for j in range(m):
            inst = [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [p.OFPActionOutput(2)])]
            dp.send_msg(p.OFPFlowMod(dp, table_id=1, priority=100,
                                     match=p.OFPMatch(eth_dst=mac(j)), instructions=inst))
        self.expected = (n, m)
        dp.send_msg(p.OFPBarrierRequest(dp))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier(self, ev):
        print("installed %d %d" % self.expected, flush=True)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    def error(self, ev):
        print("error type=%d code=%d" % (ev.msg.type, ev.msg.code), flush=True)


if __name__ == "__main__":
    from os_ken import cfg
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    cfg.CONF(args=sys.argv[1:], project="os_ken")
    app_manager.AppManager.run_apps(["acl_app"])
