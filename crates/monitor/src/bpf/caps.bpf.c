// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Two trivial programs that `nflab doctor` loads one at a time (never attached):
 * whether this kernel takes a BTF tracepoint program and an fentry program. */
#include "nflab_core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

__u64 hits = 0;

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(probe_tp_btf, void *skb)
{
	hits++;
	return 0;
}

SEC("fentry/udp_sendmsg")
int BPF_PROG(probe_fentry, void *sk)
{
	hits++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
