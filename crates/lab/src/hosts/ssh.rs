//! Running `nflab remote` on a host of the inventory: over SSH (host key checking
//! always on, one multiplexed connection per host) or, for `address = "local"`,
//! as a child process. Every word of the remote command is single-quoted.

use std::io::{BufRead, Read};
use std::process::Command;

use crate::error::LabError;
use crate::spec::hosts::HostEntry;

/// Seconds between ssh's keep-alives, and how many may go unanswered: a host
/// that vanishes ends the call within about 15 s instead of never.
const ALIVE_INTERVAL_S: u32 = 5;
const ALIVE_COUNT: u32 = 3;

/// The most of a remote's stderr kept (its end: the error is the last line).
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// The most of a remote's JSON answer read.
const ANSWER_MAX_BYTES: u64 = 16 << 20;

impl HostEntry {
    /// The ssh command that runs `nflab ARGS` on this host. ssh hands the
    /// remote shell one string, so every word is single-quoted for it.
    fn ssh(&self, args: &[&str], known_hosts: Option<&std::path::Path>) -> Command {
        let mut c = Command::new(nflab_io::process::system_tool("ssh"));
        c.args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]);
        // ssh keeps the first value of an option: these come before the user's.
        c.args(super::ssh_args::host_key_options(known_hosts));
        // One connection per host for the study, unless the spec's options
        // say how to multiplex (ControlMaster, ControlPath, ControlPersist).
        let own_control = self.ssh_options.iter().any(|o| {
            let o = o.trim_start_matches("-o").trim_start().to_ascii_lowercase();
            o.starts_with("control")
        });
        if !own_control {
            c.args(super::ssh_mux::options());
        }
        if let Some(p) = self.port {
            c.args(["-p", &p.to_string()]);
        }
        c.args(&self.ssh_options);
        // After the spec's options: ssh keeps the first value, so a spec may set its own.
        c.args([
            "-o".to_string(),
            format!("ServerAliveInterval={ALIVE_INTERVAL_S}"),
            "-o".to_string(),
            format!("ServerAliveCountMax={ALIVE_COUNT}"),
        ]);
        c.arg(&self.address).arg("--");
        let words: Vec<String> = std::iter::once(self.nflab.as_deref().unwrap_or("nflab"))
            .chain(args.iter().copied())
            .map(shell_quote)
            .collect();
        c.arg(words.join(" "));
        c
    }

    /// Run `nflab remote ARGS` on this host and parse its JSON answer.
    pub fn remote(&self, args: &[&str]) -> Result<serde_json::Value, LabError> {
        let out = self.remote_output(args, std::process::Stdio::piped())?;
        self.answer(args, out)
    }

    /// Run `nflab remote ARGS` on this host with its stdout going to `stdout`.
    pub fn remote_output(
        &self,
        args: &[&str],
        stdout: std::process::Stdio,
    ) -> Result<std::process::Output, LabError> {
        let (mut cmd, _pinned) = self.remote_command(args)?;
        let child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(stdout)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| {
                LabError::Host(format!(
                    "cannot run ssh for host {}: {e}; install openssh-client",
                    self.address
                ))
            })?;
        bounded_output(child)
            .map_err(|e| LabError::Host(format!("host {}: reading its answer: {e}", self.address)))
    }

    /// The command that runs `nflab remote ARGS` on this host, and the pinned
    /// key's file it needs until it ends.
    pub fn remote_command(
        &self,
        args: &[&str],
    ) -> Result<(Command, Option<super::ssh_args::PinnedKey>), LabError> {
        // Checked again here: a host can come from a journal or a stored spec
        // that no spec check saw (gc's replay, --resume of another tree).
        crate::spec::hosts::check_entry(self, &format!("host {}", self.address))
            .map_err(LabError::Host)?;
        let pinned = super::ssh_args::PinnedKey::write(self)?;
        let cmd = if self.is_local() {
            let mut c =
                Command::new(std::env::current_exe().map_err(|e| LabError::Host(e.to_string()))?);
            c.arg("remote").args(args);
            c
        } else {
            let mut all = vec!["remote"];
            all.extend_from_slice(args);
            self.ssh(&all, pinned.as_ref().map(|p| p.path()))
        };
        Ok((cmd, pinned))
    }

    /// The JSON answer of `nflab remote ARGS`, or its failure in one sentence.
    fn answer(
        &self,
        args: &[&str],
        out: std::process::Output,
    ) -> Result<serde_json::Value, LabError> {
        self.check_status(args, &out)?;
        serde_json::from_slice(&out.stdout).map_err(|e| {
            LabError::Host(format!(
                "host {} answered `nflab remote {}` with something that is not JSON ({e}): is the same nflab installed there?",
                self.address,
                args.first().unwrap_or(&"")
            ))
        })
    }

    /// Err with the remote's last error line when `out` failed.
    pub fn check_status(&self, args: &[&str], out: &std::process::Output) -> Result<(), LabError> {
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if let Some(why) = super::ssh_args::host_key_refusal(&err, self) {
                return Err(LabError::Host(why));
            }
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            return Err(LabError::Host(format!(
                "host {} did not carry out `nflab remote {}`: {last}",
                self.address,
                args.first().unwrap_or(&"")
            )));
        }
        Ok(())
    }
}

/// Wait for `child` and collect its output in bounded memory: stdout up to
/// [`ANSWER_MAX_BYTES`] (more is an error), the last [`STDERR_TAIL_BYTES`]
/// of stderr. A remote that writes without end cannot exhaust this host.
pub fn bounded_output(mut child: std::process::Child) -> std::io::Result<std::process::Output> {
    let err = child.stderr.take();
    let out = child.stdout.take();
    let (stdout, stderr) = std::thread::scope(|s| {
        let tail = s.spawn(move || {
            let mut t = Tail::new(STDERR_TAIL_BYTES);
            if let Some(mut e) = err {
                let _ = std::io::copy(&mut e, &mut t);
            }
            t.into_bytes()
        });
        let stdout = match out {
            Some(o) => {
                let mut buf = Vec::new();
                let read = o.take(ANSWER_MAX_BYTES + 1).read_to_end(&mut buf);
                match read {
                    Ok(_) if buf.len() as u64 > ANSWER_MAX_BYTES => {
                        let _ = child.kill();
                        Err(std::io::Error::other(format!(
                            "more than {} MiB on stdout",
                            ANSWER_MAX_BYTES >> 20
                        )))
                    }
                    Ok(_) => Ok(buf),
                    Err(e) => Err(e),
                }
            }
            None => Ok(Vec::new()),
        };
        (stdout, tail.join().unwrap_or_default())
    });
    let status = child.wait()?;
    Ok(std::process::Output {
        status,
        stdout: stdout?,
        stderr,
    })
}

/// The last `cap` bytes written to it.
pub struct Tail {
    buf: std::collections::VecDeque<u8>,
    cap: usize,
}

impl Tail {
    /// Keeps at most `cap` bytes.
    pub fn new(cap: usize) -> Tail {
        Tail {
            buf: std::collections::VecDeque::with_capacity(cap.min(1 << 16)),
            cap,
        }
    }

    /// What it kept.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf.into()
    }
}

impl std::io::Write for Tail {
    fn write(&mut self, all: &[u8]) -> std::io::Result<usize> {
        let b = &all[all.len().saturating_sub(self.cap)..];
        let over = (self.buf.len() + b.len()).saturating_sub(self.cap);
        self.buf.drain(..over);
        self.buf.extend(b);
        Ok(all.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One line of `input` without its newline, reading at most `max` bytes of
/// it: a longer line is cut there and the rest of it skipped. `None` at the
/// end of the input.
pub fn read_line_bounded(input: &mut impl BufRead, max: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let n = input
        .by_ref()
        .take(max as u64)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if line.len() == max {
        // Cut: skip to the end of this line, a buffer at a time.
        loop {
            let buf = input.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            match buf.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    input.consume(i + 1);
                    break;
                }
                None => {
                    let all = buf.len();
                    input.consume(all);
                }
            }
        }
    }
    Ok(Some(line))
}

/// Quote a word for a POSIX shell: 'it'\''s'.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_sends_keep_alives_after_the_specs_own_options() {
        let h = HostEntry {
            address: "root@198.18.254.2".into(),
            ssh_options: vec!["-o".into(), "ServerAliveInterval=1".into()],
            ..Default::default()
        };
        let cmd = h.ssh(&["info"], None);
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = |o: &str| args.iter().position(|a| a == o);
        let ours = at(&format!("ServerAliveInterval={ALIVE_INTERVAL_S}")).expect("keep-alives");
        assert!(at(&format!("ServerAliveCountMax={ALIVE_COUNT}")).is_some());
        // ssh keeps the first value: the spec's comes first.
        assert!(at("ServerAliveInterval=1").unwrap() < ours, "{args:?}");
        assert!(ours < at("root@198.18.254.2").unwrap(), "{args:?}");
    }

    #[test]
    fn a_remote_that_writes_without_end_costs_bounded_memory() {
        // 40 MiB on stderr in lines of 10 MiB, a short answer on stdout.
        let child = Command::new("sh")
            .args([
                "-c",
                "for i in 1 2 3 4; do head -c 10485760 /dev/zero | tr '\\0' x >&2; echo >&2; done; echo last words >&2; echo '{}'",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = bounded_output(child).unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"{}\n");
        assert!(
            out.stderr.len() <= STDERR_TAIL_BYTES,
            "{}",
            out.stderr.len()
        );
        assert!(out.stderr.ends_with(b"last words\n"));
        // An answer beyond the bound is an error, not a buffer of any size.
        let child = Command::new("sh")
            .args(["-c", "head -c 20000000 /dev/zero"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let e = bounded_output(child).unwrap_err().to_string();
        assert!(e.contains("MiB on stdout"), "{e}");
    }

    #[test]
    fn long_lines_are_cut_and_skipped_to_their_end() {
        let mut text = vec![b'x'; 100_000];
        text.extend(b"\nshort\n");
        let mut input = std::io::BufReader::new(text.as_slice());
        let first = read_line_bounded(&mut input, 1000).unwrap().unwrap();
        assert_eq!(first.len(), 1000);
        assert_eq!(
            read_line_bounded(&mut input, 1000).unwrap().unwrap(),
            b"short"
        );
        assert_eq!(read_line_bounded(&mut input, 1000).unwrap(), None);
    }
}
