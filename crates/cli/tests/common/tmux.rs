//! A command on a real terminal: a detached tmux session on its own socket,
//! its screen read with `capture-pane`, the server killed on drop (also when
//! the test fails), so nothing of it outlives the test.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub struct Tmux {
    socket: std::path::PathBuf,
    session: String,
}

impl Tmux {
    /// Start `shell_command` in a 160×40 terminal; its socket lives in `dir`.
    pub fn start(dir: &Path, tag: &str, shell_command: &str) -> Tmux {
        let t = Tmux {
            socket: dir.join(format!("tmux-{tag}.sock")),
            session: format!("nflabtest-{tag}-{}", std::process::id()),
        };
        let o = t.tmux(&[
            "new-session",
            "-d",
            "-s",
            &t.session,
            "-x",
            "160",
            "-y",
            "40",
            shell_command,
        ]);
        assert!(
            o.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        t
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// What the terminal shows now.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .tmux(&["capture-pane", "-p", "-t", &self.session])
                .stdout,
        )
        .to_string()
    }

    /// Read the screen ten times a second, handing each to `seen`, until
    /// `done` holds for one or `limit` passes; the last screen.
    pub fn watch(
        &self,
        limit: Duration,
        mut seen: impl FnMut(&str),
        done: impl Fn(&str) -> bool,
    ) -> String {
        let start = Instant::now();
        let mut screen = String::new();
        while start.elapsed() < limit {
            screen = self.screen();
            seen(&screen);
            if done(&screen) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        screen
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}
