//! System knobs: settings an experiment changes on the host, each applied,
//! read back, recorded and reverted.
//!
//! Seeds 001 and 002 change kernel and CPU settings (busy polling, governor,
//! isolation) and need each one recorded. A knob the host does not have is
//! recorded as unsupported and the run goes on, unless the spec lists it in
//! `required`. Every knob is put back to its old value when the run ends —
//! on success, error or signal — by [`AppliedKnobs`]'s `Drop`.
//!
//! ```toml
//! [knobs]
//! sysctl = { "net.core.busy_poll" = 50, "net.core.busy_read" = 50 }
//! cpu_governor = "performance"
//! required = ["net.core.busy_poll"]
//!
//! [sweep]
//! "knobs.sysctl.net.core.busy_poll" = [0, 50]
//! ```

use std::path::PathBuf;

use crate::error::LabError;
pub use crate::knobs::iface::KnobRecord;
use crate::knobs::journal::{KnobJournal, KnobLock, Restore};
use crate::spec::knobs::value_text;
pub use crate::spec::knobs::{BackgroundLoad, KnobsSection};

fn record_of(name: &str, path: &str, requested: &str) -> KnobRecord {
    KnobRecord {
        name: name.into(),
        path: path.into(),
        requested: requested.into(),
        before: None,
        applied: None,
        status: String::new(),
        reverted: None,
    }
}

/// Threads that burn CPU until stopped.
#[derive(Debug)]
pub(crate) struct LoadThreads {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl LoadThreads {
    pub(crate) fn start(b: &BackgroundLoad) -> LoadThreads {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = b
            .cpus
            .iter()
            .map(|&cpu| {
                let stop = stop.clone();
                let (busy, period) = (
                    std::time::Duration::from_secs_f64(b.period_ms as f64 / 1e3 * b.duty),
                    std::time::Duration::from_millis(b.period_ms),
                );
                let policy = b.policy.clone();
                std::thread::spawn(move || {
                    crate::sys::cpu::pin_thread(cpu);
                    if let Some(p) = &policy {
                        // Checked with the spec; a refusal leaves the default policy.
                        let _ = nflab_io::process::set_thread_sched(p);
                    }
                    while !stop.load(Ordering::Relaxed) {
                        let start = std::time::Instant::now();
                        while start.elapsed() < busy {
                            std::hint::spin_loop();
                        }
                        if let Some(rest) = period.checked_sub(start.elapsed()) {
                            std::thread::sleep(rest);
                        }
                    }
                })
            })
            .collect();
        LoadThreads { stop, threads }
    }

    pub(crate) fn stop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Knobs in force; reverted on drop.
#[derive(Debug, Default)]
pub struct AppliedKnobs {
    records: Vec<KnobRecord>,
    undo: Vec<(PathBuf, String)>,
    reverted: bool,
    /// Open while the PM QoS request holds; closing it ends the request.
    pm_qos: Option<std::fs::File>,
    load: Option<LoadThreads>,
    sched_before: Option<String>,
    /// The originals of `undo`, on disk for `nflab topo gc` after a crash.
    journal: Option<KnobJournal>,
    /// Held while host knobs are changed: no other run changes them meanwhile.
    lock: Option<KnobLock>,
}

/// Where knobs live; the tests point this at a temporary tree.
#[derive(Debug, Clone)]
pub struct KnobRoots {
    /// `/proc/sys`.
    pub proc_sys: PathBuf,
    /// `/sys/devices/system/cpu`.
    pub cpu: PathBuf,
    /// `/proc` (interrupts and IRQ affinity).
    pub proc: PathBuf,
    /// `/dev/cpu_dma_latency`.
    pub pm_qos: PathBuf,
    /// Where the knob journal goes (`/run/nflab`).
    pub journal: PathBuf,
}

impl Default for KnobRoots {
    fn default() -> Self {
        KnobRoots {
            proc_sys: "/proc/sys".into(),
            cpu: "/sys/devices/system/cpu".into(),
            proc: "/proc".into(),
            pm_qos: "/dev/cpu_dma_latency".into(),
            journal: crate::knobs::journal::JOURNAL_DIR.into(),
        }
    }
}

fn read_trim(p: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

impl AppliedKnobs {
    /// Apply every knob of `section` under `roots`; refused in one sentence
    /// while another process has host knobs set ([`KnobLock`]).
    pub fn apply(section: &KnobsSection, roots: &KnobRoots) -> Result<AppliedKnobs, LabError> {
        AppliedKnobs::apply_when_free(section, roots, None)
    }

    /// [`AppliedKnobs::apply`], waiting while another process has host knobs
    /// set, until `wait` is set (then refused).
    pub fn apply_when_free(
        section: &KnobsSection,
        roots: &KnobRoots,
        wait: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<AppliedKnobs, LabError> {
        let mut applied = AppliedKnobs {
            records: Vec::new(),
            undo: Vec::new(),
            reverted: false,
            pm_qos: None,
            load: None,
            sched_before: None,
            journal: Some(KnobJournal::new(&roots.journal)),
            lock: None,
        };
        let mut targets: Vec<(String, PathBuf, String)> = section
            .sysctl
            .iter()
            .map(|(name, v)| {
                (
                    name.clone(),
                    roots.proc_sys.join(name.replace('.', "/")),
                    value_text(v).unwrap_or_default(),
                )
            })
            .collect();
        if let Some(g) = &section.cpu_governor {
            let cpus: Vec<PathBuf> = std::fs::read_dir(&roots.cpu)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.path())
                        .filter(|p| {
                            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                                n.starts_with("cpu") && n[3..].parse::<u32>().is_ok()
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            if cpus.is_empty() {
                targets.push((
                    "cpu_governor".into(),
                    roots.cpu.join("cpu0/cpufreq/scaling_governor"),
                    g.clone(),
                ));
            }
            for c in cpus {
                targets.push((
                    "cpu_governor".into(),
                    c.join("cpufreq/scaling_governor"),
                    g.clone(),
                ));
            }
        }
        if !section.irq_affinity.is_empty() {
            let irqs = std::fs::read_to_string(roots.proc.join("interrupts")).unwrap_or_default();
            for (pat, cpus) in &section.irq_affinity {
                let mut found = false;
                for (irq_name, _) in crate::artifacts::snapshot::parse_interrupts(&irqs) {
                    let (num, desc) = irq_name.split_once(':').unwrap_or((&irq_name, ""));
                    if desc.contains(pat.as_str()) && num.trim().chars().all(|c| c.is_ascii_digit())
                    {
                        found = true;
                        targets.push((
                            format!("irq_affinity.{pat}"),
                            roots
                                .proc
                                .join(format!("irq/{}/smp_affinity_list", num.trim())),
                            cpus.clone(),
                        ));
                    }
                }
                if !found {
                    targets.push((
                        format!("irq_affinity.{pat}"),
                        roots.proc.join("irq/nflab-no-match"),
                        cpus.clone(),
                    ));
                }
            }
        }
        if !targets.is_empty() {
            applied.lock = Some(KnobLock::take(&roots.journal, wait)?);
        }
        for (name, path, value) in targets {
            let before = read_trim(&path);
            let mut rec = KnobRecord {
                name: name.clone(),
                path: path.display().to_string(),
                requested: value.clone(),
                before: before.clone(),
                applied: None,
                status: String::new(),
                reverted: None,
            };
            match before {
                None => rec.status = "unsupported".into(),
                Some(old) => match applied.journal(&path, &old).and_then(|()| {
                    std::fs::write(&path, &value).map_err(|e| LabError::Other(e.to_string()))
                }) {
                    Ok(()) => {
                        applied.undo.push((path.clone(), old));
                        rec.applied = read_trim(&path);
                        rec.status = if rec.applied.as_deref() == Some(value.as_str()) {
                            "applied".into()
                        } else {
                            format!(
                                "refused: reads back {:?}",
                                rec.applied.as_deref().unwrap_or("")
                            )
                        };
                    }
                    Err(LabError::Other(e)) => {
                        applied.cancel_journal_entry();
                        rec.status = format!("refused: {e}");
                    }
                    Err(journal) => {
                        applied.revert();
                        return Err(journal);
                    }
                },
            }
            let failed = rec.status != "applied";
            let required = section.required.contains(&name);
            applied.records.push(rec);
            if failed && required {
                let last = applied.records.last().cloned();
                applied.revert();
                let r = last.unwrap_or_else(|| unreachable!());
                return Err(LabError::Host(format!(
                    "required knob {name} = {value} could not be applied ({}; {}): drop it from knobs.required or use a host that supports it",
                    r.status, r.path
                )));
            }
        }
        applied.hold_process_knobs(section, roots)?;
        Ok(applied)
    }

    /// Write `path`'s original value to the journal, before changing it.
    fn journal(&mut self, path: &std::path::Path, old: &str) -> Result<(), LabError> {
        match self.journal.as_mut() {
            Some(j) => j.record(&Restore::File {
                ns: String::new(),
                path: path.display().to_string(),
                value: old.to_string(),
            }),
            None => Ok(()),
        }
    }

    fn cancel_journal_entry(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            j.cancel_last();
        }
    }

    /// PM QoS, scheduling policy and background load: held, not written once.
    fn hold_process_knobs(
        &mut self,
        section: &KnobsSection,
        roots: &KnobRoots,
    ) -> Result<(), LabError> {
        let required = |n: &str| section.required.iter().any(|r| r == n);
        if let Some(us) = section.pm_qos_latency_us {
            let mut rec = record_of(
                "pm_qos_latency_us",
                &roots.pm_qos.display().to_string(),
                &us.to_string(),
            );
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&roots.pm_qos)
            {
                Ok(mut f) => {
                    use std::io::{Read, Write};
                    let mut before = [0u8; 4];
                    rec.before = f
                        .read_exact(&mut before)
                        .ok()
                        .map(|_| i32::from_ne_bytes(before).to_string());
                    // The request is a binary s32 in µs and lasts while the file is open.
                    match f.write_all(&(us as i32).to_ne_bytes()) {
                        Ok(()) => {
                            rec.applied = std::fs::read(&roots.pm_qos)
                                .ok()
                                .filter(|b| b.len() >= 4)
                                .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]).to_string());
                            rec.status = "applied".into();
                            self.pm_qos = Some(f);
                        }
                        Err(e) => rec.status = format!("refused: {e}"),
                    }
                }
                Err(e) => rec.status = format!("unsupported: {e}"),
            }
            self.push_checked(rec, required("pm_qos_latency_us"))?;
        }
        if let Some(s) = &section.sched {
            let mut rec = record_of("sched", "generator and recorder threads", s);
            let before = nflab_io::process::thread_sched();
            rec.before = Some(before.clone());
            match nflab_io::process::set_thread_sched(s) {
                Ok(()) => {
                    rec.applied = Some(nflab_io::process::thread_sched());
                    rec.status = "applied".into();
                    self.sched_before = Some(before);
                }
                Err(e) => rec.status = format!("refused: {e}"),
            }
            self.push_checked(rec, required("sched"))?;
        }
        if let Some(b) = &section.background_load {
            let mut rec = record_of(
                "background_load",
                "threads",
                &format!(
                    "cpus {:?}, duty {}, period {} ms, policy {}",
                    b.cpus,
                    b.duty,
                    b.period_ms,
                    b.policy.as_deref().unwrap_or("other")
                ),
            );
            self.load = Some(LoadThreads::start(b));
            rec.applied = Some(rec.requested.clone());
            rec.status = "applied".into();
            self.records.push(rec);
        }
        Ok(())
    }

    fn push_checked(&mut self, rec: KnobRecord, required: bool) -> Result<(), LabError> {
        let failed = rec.status != "applied";
        let msg = format!(
            "required knob {} = {} could not be applied ({}): drop it from knobs.required or use a host that supports it",
            rec.name, rec.requested, rec.status
        );
        self.records.push(rec);
        if failed && required {
            self.revert();
            return Err(LabError::Host(msg));
        }
        Ok(())
    }

    /// Put every changed knob back, newest first.
    pub fn revert(&mut self) {
        if self.reverted {
            return;
        }
        self.reverted = true;
        if let Some(mut l) = self.load.take() {
            l.stop();
        }
        if let Some(before) = self.sched_before.take() {
            if let Err(e) = nflab_io::process::set_thread_sched(&before) {
                eprintln!("warning: could not restore the scheduling policy {before}: {e}");
            }
            if let Some(r) = self.records.iter_mut().find(|r| r.name == "sched") {
                r.reverted = Some(nflab_io::process::thread_sched());
            }
        }
        if self.pm_qos.take().is_some() {
            if let Some(r) = self
                .records
                .iter_mut()
                .find(|r| r.name == "pm_qos_latency_us")
            {
                r.reverted = r.before.clone();
            }
        }
        while let Some((path, old)) = self.undo.pop() {
            if let Err(e) = std::fs::write(&path, &old) {
                eprintln!(
                    "warning: could not restore {} to {old}: {e}",
                    path.display()
                );
            }
        }
        if let Some(j) = self.journal.as_mut() {
            j.finish();
        }
        self.lock = None;
        for r in &mut self.records {
            r.reverted = read_trim(std::path::Path::new(&r.path));
        }
    }

    /// What happened to each knob (after `revert`, with the restored values).
    pub fn records(&self) -> &[KnobRecord] {
        &self.records
    }
}

impl Drop for AppliedKnobs {
    fn drop(&mut self) {
        self.revert();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(tag: &str) -> (KnobRoots, PathBuf) {
        let base = std::env::temp_dir().join(format!("nflab-knobs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("sys/net/core")).unwrap();
        std::fs::write(base.join("sys/net/core/busy_poll"), "0\n").unwrap();
        for c in 0..2 {
            std::fs::create_dir_all(base.join(format!("cpu/cpu{c}/cpufreq"))).unwrap();
            std::fs::write(
                base.join(format!("cpu/cpu{c}/cpufreq/scaling_governor")),
                "powersave\n",
            )
            .unwrap();
        }
        std::fs::create_dir_all(base.join("cpu/cpufreq")).unwrap();
        (
            KnobRoots {
                proc_sys: base.join("sys"),
                cpu: base.join("cpu"),
                proc: base.join("proc"),
                pm_qos: base.join("cpu_dma_latency"),
                journal: base.join("journal"),
            },
            base,
        )
    }

    fn section(text: &str) -> KnobsSection {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn apply_records_and_reverts() {
        let (r, base) = roots("ok");
        let s = section("sysctl = { \"net.core.busy_poll\" = 50, \"net.core.nonexistent\" = 1 }\ncpu_governor = \"performance\"\n");
        s.validate().unwrap();
        let mut k = AppliedKnobs::apply(&s, &r).unwrap();
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "50"
        );
        assert_eq!(
            std::fs::read_to_string(base.join("cpu/cpu1/cpufreq/scaling_governor")).unwrap(),
            "performance"
        );
        let by = |n: &str| {
            k.records()
                .iter()
                .filter(|x| x.name == n)
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(by("net.core.busy_poll")[0].status, "applied");
        assert_eq!(by("net.core.busy_poll")[0].before.as_deref(), Some("0"));
        assert_eq!(by("net.core.nonexistent")[0].status, "unsupported");
        assert_eq!(by("cpu_governor").len(), 2);
        let journal = k
            .journal
            .as_ref()
            .and_then(|j| j.path())
            .unwrap()
            .to_path_buf();
        assert!(journal.exists());
        k.revert();
        assert!(!journal.exists(), "the journal outlived a normal revert");
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "0"
        );
        assert_eq!(by_rev(&k, "cpu_governor"), Some("powersave".into()));
        std::fs::remove_dir_all(base).unwrap();
    }

    fn by_rev(k: &AppliedKnobs, n: &str) -> Option<String> {
        k.records()
            .iter()
            .find(|x| x.name == n)
            .and_then(|x| x.reverted.clone())
    }

    #[test]
    fn the_journal_has_every_original_before_the_change_and_gc_replays_it() {
        let (r, base) = roots("journal");
        let s =
            section("sysctl = { \"net.core.busy_poll\" = 50 }\ncpu_governor = \"performance\"\n");
        let k = AppliedKnobs::apply(&s, &r).unwrap();
        let journal = k
            .journal
            .as_ref()
            .and_then(|j| j.path())
            .unwrap()
            .to_path_buf();
        let (_, mut entries) = crate::knobs::journal::read_journal(&journal).unwrap();
        // The CPUs come in directory order.
        entries[1..].sort_by_key(|e| format!("{e:?}"));
        let file = |p: &str, v: &str| Restore::File {
            ns: String::new(),
            path: base.join(p).display().to_string(),
            value: v.into(),
        };
        assert_eq!(
            entries,
            vec![
                file("sys/net/core/busy_poll", "0"),
                file("cpu/cpu0/cpufreq/scaling_governor", "powersave"),
                file("cpu/cpu1/cpufreq/scaling_governor", "powersave"),
            ]
        );
        // A crash: no Drop, no revert. The owner line then names a dead process.
        std::mem::forget(k);
        let text = std::fs::read_to_string(&journal).unwrap();
        let rest = text.split_once('\n').unwrap().1;
        std::fs::write(&journal, format!("owner {} 1\n{rest}", u32::MAX - 1)).unwrap();
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "50"
        );
        let replayed = crate::knobs::journal::replay_dead(&r.journal);
        assert_eq!(replayed.len(), 1);
        assert_eq!(replayed[0].restored, 3);
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "0"
        );
        assert_eq!(
            std::fs::read_to_string(base.join("cpu/cpu1/cpufreq/scaling_governor")).unwrap(),
            "powersave"
        );
        assert!(!journal.exists());
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_second_run_setting_host_knobs_waits_and_the_host_ends_as_it_was() {
        use std::sync::atomic::AtomicBool;
        let (r, base) = roots("two-runs");
        let knob = base.join("sys/net/core/busy_poll");
        let first =
            AppliedKnobs::apply(&section("sysctl = { \"net.core.busy_poll\" = 50 }"), &r).unwrap();
        // Refused in one sentence while the first holds them.
        let e = AppliedKnobs::apply(&section("sysctl = { \"net.core.busy_poll\" = 70 }"), &r)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("pid {}", std::process::id()))
                && e.contains("cannot overlap")
                && !e.contains('\n'),
            "{e}"
        );
        // Waiting: it goes on once the first put its value back, and sees the original.
        let never = AtomicBool::new(false);
        let second = std::thread::scope(|s| {
            let waiting = s.spawn(|| {
                AppliedKnobs::apply_when_free(
                    &section("sysctl = { \"net.core.busy_poll\" = 70 }"),
                    &r,
                    Some(&never),
                )
            });
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(!waiting.is_finished(), "the second run did not wait");
            assert_eq!(std::fs::read_to_string(&knob).unwrap(), "50");
            drop(first);
            waiting.join().unwrap().unwrap()
        });
        assert_eq!(second.records()[0].before.as_deref(), Some("0"));
        assert_eq!(std::fs::read_to_string(&knob).unwrap(), "70");
        drop(second);
        assert_eq!(std::fs::read_to_string(&knob).unwrap().trim(), "0");
        assert!(
            !r.journal.join("knobs.lock").exists(),
            "the lock file stays"
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_journal_that_cannot_be_written_changes_no_knob() {
        let (mut r, base) = roots("nojournal");
        // A file where the journal's directory should be.
        std::fs::write(base.join("blocked"), "").unwrap();
        r.journal = base.join("blocked/journal");
        let e = AppliedKnobs::apply(&section("sysctl = { \"net.core.busy_poll\" = 50 }"), &r)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("knob journal") && e.contains("blocked/journal"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "0\n"
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn drop_reverts_and_required_missing_knob_stops() {
        let (r, base) = roots("req");
        {
            let _k = AppliedKnobs::apply(&section("sysctl = { \"net.core.busy_poll\" = 7 }"), &r)
                .unwrap();
            assert_eq!(
                std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
                "7"
            );
        }
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "0"
        );
        let s = section("sysctl = { \"net.core.busy_poll\" = 9, \"net.core.missing\" = 1 }\nrequired = [\"net.core.missing\"]\n");
        let e = AppliedKnobs::apply(&s, &r).unwrap_err().to_string();
        assert!(
            e.contains("net.core.missing") && e.contains("unsupported"),
            "{e}"
        );
        // The knob applied before the failure was put back.
        assert_eq!(
            std::fs::read_to_string(base.join("sys/net/core/busy_poll")).unwrap(),
            "0"
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn irq_affinity_matches_by_name_and_process_knobs_hold_until_revert() {
        let (r, base) = roots("irq");
        std::fs::create_dir_all(base.join("proc/irq/24")).unwrap();
        std::fs::create_dir_all(base.join("proc/irq/25")).unwrap();
        std::fs::write(
            base.join("proc/interrupts"),
            "           CPU0       CPU1\n 24:   5   6   PCI-MSI 1-edge   virtio0-input.0\n 25:   1   1   PCI-MSI 2-edge   virtio0-output.0\n",
        )
        .unwrap();
        std::fs::write(base.join("proc/irq/24/smp_affinity_list"), "0-1\n").unwrap();
        std::fs::write(base.join("proc/irq/25/smp_affinity_list"), "0-1\n").unwrap();
        std::fs::write(base.join("cpu_dma_latency"), 2_000_000_000i32.to_ne_bytes()).unwrap();
        let s = section(
            "irq_affinity = { \"virtio0-input\" = \"1\", \"nosuchirq\" = \"0\" }\npm_qos_latency_us = 0\nbackground_load = { cpus = [0], duty = 0.2, period_ms = 5 }\n",
        );
        s.validate().unwrap();
        let mut k = AppliedKnobs::apply(&s, &r).unwrap();
        assert_eq!(
            std::fs::read_to_string(base.join("proc/irq/24/smp_affinity_list")).unwrap(),
            "1"
        );
        assert_eq!(
            std::fs::read_to_string(base.join("proc/irq/25/smp_affinity_list")).unwrap(),
            "0-1\n"
        );
        let by =
            |k: &AppliedKnobs, n: &str| k.records().iter().find(|x| x.name == n).cloned().unwrap();
        assert_eq!(by(&k, "irq_affinity.virtio0-input").status, "applied");
        assert_eq!(by(&k, "irq_affinity.nosuchirq").status, "unsupported");
        assert_eq!(by(&k, "pm_qos_latency_us").status, "applied");
        assert_eq!(
            by(&k, "pm_qos_latency_us").before.as_deref(),
            Some("2000000000")
        );
        assert_eq!(by(&k, "background_load").status, "applied");
        k.revert();
        assert_eq!(
            std::fs::read_to_string(base.join("proc/irq/24/smp_affinity_list")).unwrap(),
            "0-1"
        );
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn sched_policy_is_validated() {
        assert!(section("sched = \"fifo:50\"").validate().is_ok());
        let e = section("sched = \"fifo:0\"").validate().unwrap_err();
        assert!(e.contains("fifo:0") && e.contains("1 to 99"), "{e}");
        let e = section("background_load = { cpus = [0], duty = 1.5 }")
            .validate()
            .unwrap_err();
        assert!(e.contains("duty"), "{e}");
    }

    #[test]
    fn validation_names_the_knob() {
        let e = section("sysctl = { \"net/core\" = 1 }")
            .validate()
            .unwrap_err();
        assert!(e.contains("net/core"), "{e}");
        let e = section("required = [\"net.core.x\"]")
            .validate()
            .unwrap_err();
        assert!(e.contains("net.core.x"), "{e}");
    }
}
