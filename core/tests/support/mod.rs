//! What the script tests share: a `redis-server` started on a free loopback port for one
//! test (stopped when dropped), and a blocking RESP client for it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use smart_limit_core::redis::resp::{self, Value};

pub mod twin;

pub struct Server {
    child: Child,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start() -> Option<Server> {
    let port = TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = child else {
        eprintln!("redis-server not found: skipping the script tests");
        return None;
    };
    let server = Server { child, port };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        // A server still starting may accept and then reset: keep asking until it answers.
        if let Ok(mut c) = Client::connect(port) {
            if c.try_cmd(&packed(&["PING"])).ok() == Some(Value::Status(b"PONG".to_vec())) {
                return Some(server);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("redis-server did not start on port {port}");
}

pub struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(port: u16) -> std::io::Result<Client> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        Ok(Client { s, buf: vec![] })
    }

    pub fn cmd(&mut self, bytes: &[u8]) -> Value {
        self.try_cmd(bytes).unwrap()
    }

    pub fn try_cmd(&mut self, bytes: &[u8]) -> std::io::Result<Value> {
        self.s.write_all(bytes)?;
        loop {
            if let Some((v, used)) = resp::parse(&self.buf).map_err(std::io::Error::other)? {
                self.buf.drain(..used);
                return Ok(v);
            }
            let mut chunk = [0u8; 4096];
            let n = self.s.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::Error::other("redis closed the connection"));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// One command, encoded by the redis crate.
pub fn packed(args: &[&str]) -> Vec<u8> {
    let mut c = ::redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.get_packed_command()
}
