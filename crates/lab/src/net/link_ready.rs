//! Waiting until links just set up can transmit. A device set up keeps the
//! `noop` qdisc, which drops every frame, until the kernel's link watch
//! activates it — up to a second later, more on a loaded host. Frames sent in
//! between vanish without a counter: the first sensor messages of NCSbench
//! runs were lost that way.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::LabError;

/// How long a link may take to leave `noop` before set-up fails.
const LIMIT: Duration = Duration::from_secs(5);

/// Wait until every link of `ns` that is up (or only `dev`, which must also
/// report state UP or UNKNOWN) has left the `noop` qdisc.
pub fn wait_until_transmitting(ns: &str, dev: Option<&str>) -> Result<(), LabError> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let mut args = vec!["-n", ns, "-o", "link", "show"];
        args.extend(dev);
        let out = Command::new(nflab_io::process::system_tool("ip"))
            .args(&args)
            .output()
            .map_err(|e| LabError::Host(format!("cannot run 'ip': {e}; install iproute2")))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let waiting: Vec<&str> = text
            .lines()
            .filter(|l| not_ready(l, dev.is_some()))
            .collect();
        if out.status.success() && waiting.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(LabError::Topology(format!(
                "links in {ns} still cannot transmit {} s after 'ip link set up': {}",
                LIMIT.as_secs(),
                waiting.join("; ").trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One line of `ip -o link show`: set up but still on `noop` (or, for a named
/// device, not yet UP).
fn not_ready(line: &str, named: bool) -> bool {
    let flags = line.split('<').nth(1).and_then(|s| s.split('>').next());
    let set_up = flags.is_some_and(|f| f.split(',').any(|x| x == "UP"));
    let noop = line.contains("qdisc noop");
    let running = line.contains("state UP") || line.contains("state UNKNOWN");
    if named {
        noop || !running
    } else {
        set_up && noop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_links_set_up_and_still_on_noop_are_waited_for() {
        let up_noop = "3: lg0@if2: <BROADCAST,MULTICAST,UP> mtu 1500 qdisc noop state DOWN";
        let up_ready =
            "3: lg0@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP";
        let down = "4: dummy: <BROADCAST,NOARP> mtu 1500 qdisc noop state DOWN";
        let lo = "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN";
        assert!(not_ready(up_noop, false));
        assert!(!not_ready(up_ready, false));
        assert!(!not_ready(down, false));
        assert!(!not_ready(lo, false));
        assert!(not_ready(up_noop, true));
        assert!(!not_ready(up_ready, true));
        assert!(not_ready(down, true));
    }
}
