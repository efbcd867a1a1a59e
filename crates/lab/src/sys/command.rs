//! A user's command run by nflab (an external DuT's hooks): an argument vector
//! without a shell, in its own process group so a timeout takes its children too,
//! with the tails of its output kept for the record.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How much of each output stream is kept, from its end.
const TAIL_BYTES: usize = 4096;

/// What a command did.
#[derive(Debug, Clone, Serialize)]
pub struct CommandRun {
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// Its exit code; `None` when it was killed (a timeout or a signal) or never ran.
    pub exit_code: Option<i32>,
    /// It outlived its timeout and was killed.
    pub timed_out: bool,
    /// How long it ran, s.
    pub duration_s: f64,
    /// The last bytes of its standard output.
    pub stdout_tail: String,
    /// The last bytes of its standard error.
    pub stderr_tail: String,
    /// Why it could not be started, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawn_error: Option<String>,
}

impl CommandRun {
    /// It ran and exited with 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// The last line of its standard error (else of its output) that says something
    /// (not a row of `^` markers under an echoed command), for a sentence.
    pub fn last_line(&self) -> &str {
        let says = |l: &&str| l.chars().any(char::is_alphanumeric);
        [&self.stderr_tail, &self.stdout_tail]
            .into_iter()
            .find_map(|t| t.lines().rev().find(says))
            .map_or("no output", str::trim)
    }
}

/// A command for a one-line sentence: white space folded, a long script cut.
pub fn one_line(argv: &[String]) -> String {
    const MOST: usize = 60;
    let line = argv
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    match line.char_indices().nth(MOST) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// Run `argv` with `env` added to nflab's environment, for at most `timeout`; a
/// command still running then is killed with its process group. It starts from a
/// thread of its own on every CPU under the default policy: whatever this thread
/// was pinned to or raised to (a generator's CPU, SCHED_FIFO) its children would
/// inherit, daemons included.
pub fn run(argv: &[String], env: &[(&str, String)], timeout: Duration) -> CommandRun {
    std::thread::scope(|s| {
        s.spawn(|| {
            unpin_this_thread();
            run_here(argv, env, timeout)
        })
        .join()
        .unwrap_or_else(|_| CommandRun {
            argv: argv.to_vec(),
            exit_code: None,
            timed_out: false,
            duration_s: 0.0,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            spawn_error: Some("the thread that ran it panicked".into()),
        })
    })
}

/// Every CPU and SCHED_OTHER for the calling thread (best effort).
fn unpin_this_thread() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut set = nix::sched::CpuSet::new();
    for cpu in 0..cpus {
        let _ = set.set(cpu);
    }
    let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    let _ = nflab_io::process::set_thread_sched("other");
}

fn run_here(argv: &[String], env: &[(&str, String)], timeout: Duration) -> CommandRun {
    let started = Instant::now();
    let mut run = CommandRun {
        argv: argv.to_vec(),
        exit_code: None,
        timed_out: false,
        duration_s: 0.0,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        spawn_error: None,
    };
    let Some((program, args)) = argv.split_first() else {
        run.spawn_error = Some("an empty command".into());
        return run;
    };
    // PATH of the system's directories only: a hook's `sh` and the `ip` its
    // script names are root's, never a caller's planted ones (the lookup of
    // `program` itself uses the child's PATH).
    let child = Command::new(program)
        .args(args)
        .env("PATH", nflab_io::process::system_path())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            run.spawn_error = Some(format!("cannot run {program}: {e}"));
            return run;
        }
    };
    let out = Tail::read(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = Tail::read(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() >= timeout => {
                run.timed_out = true;
                // The whole group: a shell's children hold the pipes open otherwise.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => break None,
        }
    };
    run.exit_code = status.and_then(|s| s.code());
    run.duration_s = started.elapsed().as_secs_f64();
    // A daemon the command started may hold its pipes open for good: what arrived by
    // shortly after the command's end is its output.
    let settle = Instant::now() + PIPE_SETTLE;
    run.stdout_tail = out.take(settle);
    run.stderr_tail = err.take(settle);
    run
}

/// How long the output of an ended command may still take to arrive.
const PIPE_SETTLE: Duration = Duration::from_millis(300);

/// The tail of one output stream, read by a thread of its own.
struct Tail {
    buf: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    reader: std::thread::JoinHandle<()>,
}

impl Tail {
    fn read(stream: Option<Box<dyn Read + Send>>) -> Tail {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let shared = std::sync::Arc::clone(&buf);
        let reader = std::thread::spawn(move || {
            let Some(mut s) = stream else { return };
            let mut chunk = [0u8; 4096];
            while let Ok(n) = s.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut tail = shared.lock().unwrap_or_else(|e| e.into_inner());
                tail.extend_from_slice(&chunk[..n]);
                let over = tail.len().saturating_sub(TAIL_BYTES);
                tail.drain(..over);
            }
        });
        Tail { buf, reader }
    }

    /// What arrived, once the stream ended or `deadline` passed (the reader then
    /// goes on alone until the stream's last writer is gone).
    fn take(self, deadline: Instant) -> String {
        while !self.reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let tail = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&tail).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn exit_code_output_tails_and_environment_are_kept() {
        let r = run(
            &argv(&["sh", "-c", "echo out; echo \"err $NFLAB_X\" >&2; exit 3"]),
            &[("NFLAB_X", "y".into())],
            Duration::from_secs(10),
        );
        assert_eq!(r.exit_code, Some(3));
        assert!(!r.succeeded() && !r.timed_out);
        assert_eq!(r.stdout_tail, "out\n");
        assert_eq!(r.last_line(), "err y");
    }

    #[test]
    fn a_command_that_outlives_its_timeout_is_killed_with_its_children() {
        let pidfile = std::env::temp_dir().join(format!("nflab-cmd-test-{}", std::process::id()));
        let script = format!(
            "sleep 30 & echo $! > {}; sleep 30; echo never",
            pidfile.display()
        );
        let r = run(
            &argv(&["sh", "-c", &script]),
            &[],
            Duration::from_millis(300),
        );
        assert!(r.timed_out);
        assert_eq!(r.exit_code, None);
        assert!(!r.stdout_tail.contains("never"));
        // The shell's background child went with the group.
        let child: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::fs::remove_file(&pidfile).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let state = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let after_comm = state.rsplit(')').next().unwrap_or("").trim_start();
        assert!(state.is_empty() || after_comm.starts_with('Z'), "{state}");
    }

    #[test]
    fn a_hook_runs_unpinned_under_the_default_policy() {
        crate::sys::cpu::pin_thread(0);
        let r = run(
            &argv(&["sh", "-c", "grep Cpus_allowed_list /proc/self/status"]),
            &[],
            Duration::from_secs(10),
        );
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let want = if cpus == 1 {
            "0".to_string()
        } else {
            format!("0-{}", cpus - 1)
        };
        assert!(r.stdout_tail.trim().ends_with(&want), "{}", r.stdout_tail);
    }

    #[test]
    fn a_long_script_is_one_short_line() {
        let s = one_line(&argv(&[
            "sh",
            "-c",
            "set -e\n  ip link add a type veth\n  ip link add b type veth peer name c",
        ]));
        assert!(!s.contains('\n') && s.chars().count() <= 61, "{s}");
        assert!(s.starts_with("sh -c set -e ip link add a type veth"), "{s}");
    }

    #[test]
    fn a_daemon_holding_the_pipes_does_not_hold_the_command_up() {
        let started = Instant::now();
        let r = run(
            &argv(&["sh", "-c", "echo started; (sleep 5 &) ; exit 0"]),
            &[],
            Duration::from_secs(10),
        );
        assert!(r.succeeded());
        assert_eq!(r.stdout_tail, "started\n");
        // The background sleep keeps the pipes for 5 s; the run did not wait for it.
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_missing_program_is_named() {
        let r = run(&argv(&["/nonexistent/hook"]), &[], Duration::from_secs(1));
        assert!(r
            .spawn_error
            .as_deref()
            .is_some_and(|e| e.contains("/nonexistent/hook")));
        assert!(!r.succeeded());
    }

    #[test]
    fn only_the_tail_of_a_long_output_is_kept() {
        let r = run(
            &argv(&[
                "sh",
                "-c",
                "i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done",
            ]),
            &[],
            Duration::from_secs(10),
        );
        assert!(r.stdout_tail.len() <= TAIL_BYTES);
        assert!(r.stdout_tail.ends_with("line2999\n"));
    }
}
