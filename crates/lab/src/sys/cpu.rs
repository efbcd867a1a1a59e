//! Where nflab's own threads run: the generator's and recorder's threads are
//! pinned to the CPUs the spec gives them, apart from the DuT's.

/// Pin the calling thread; an impossible pin is reported, not fatal.
pub fn pin_thread(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    if set.set(cpu).is_ok() {
        if let Err(e) = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set) {
            eprintln!("warning: cannot pin a thread to CPU {cpu}: {e}");
        }
    }
}

/// SCHED_FIFO priority of the DuT threads nflab runs itself (`dut.realtime`: the data
/// plane's and the link's workers, the udp relay): above the generator and recorder.
pub const DUT_PRIORITY: i32 = 50;
