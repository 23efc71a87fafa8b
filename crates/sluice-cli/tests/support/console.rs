//! `sluice console` run as a child process of a test, on a free port.

use super::Env;
use super::http::{free_port, status_of};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running `sluice console`, killed when dropped.
pub struct Console {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Console {
    /// Starts it (with `SLUICE_CONSOLE_TOKEN` when `token`) and waits until it listens.
    pub fn start(env: &Env, name: &str, token: Option<&str>) -> Console {
        Self::start_with(env, name, token, &[])
    }

    /// As [`Console::start`], with more environment (a mapping file: `SLUICE_SINKS_FILE`).
    pub fn start_with(
        env: &Env,
        name: &str,
        token: Option<&str>,
        extra: &[(&str, &str)],
    ) -> Console {
        let port = free_port();
        let log = env.dir.join(format!("{name}.log"));
        let mut cmd = env.sluice(&["console"]);
        cmd.env("SLUICE_CONSOLE_ADDR", format!("127.0.0.1:{port}"));
        cmd.envs(extra.iter().copied());
        if let Some(token) = token {
            cmd.env("SLUICE_CONSOLE_TOKEN", token);
        }
        cmd.stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut console = Console {
            child: cmd.spawn().unwrap(),
            port,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while status_of(port, "/login").is_none() {
            if let Some(status) = console.child.try_wait().unwrap() {
                panic!("sluice console exited with {status}:\n{}", console.tail());
            }
            assert!(Instant::now() < deadline, "console did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        console
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `GET path` as a browser on this host sends it (the `Host` the console answers to):
    /// (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        (
            head.split(' ').nth(1).unwrap().parse().unwrap(),
            body.to_owned(),
        )
    }

    pub fn tail(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
