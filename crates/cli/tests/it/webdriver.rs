//! A real browser for the page's tests: Debian's chromium, headless, driven by its
//! chromedriver through the W3C WebDriver protocol (JSON over HTTP), with the few commands
//! the tests use. chromedriver runs in the lab's namespace, where `serve` listens; each
//! command is one connection opened from a thread in that namespace. A machine without
//! chromium or chromedriver fails the test (`.ci/run` installs both).

#![allow(unreachable_pub)]

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::util::Scratch;

/// W3C's key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// chromedriver's port in the lab's namespace (a namespace of the test's own: free).
const PORT: u16 = 9515;

/// A headless chromium session.
pub struct Browser {
    netns: String,
    session: String,
    driver: Child,
    _profile: Scratch,
}

/// Finds a tool the browser tests cannot do without.
fn require(tool: &str) {
    assert!(
        crate::util::have(tool),
        "{tool} is missing: the browser tests need Debian's chromium and chromium-driver (.ci/run installs them)"
    );
}

impl Browser {
    /// Starts chromedriver in `netns` and a headless chromium whose downloads go to
    /// `downloads`.
    pub fn start(netns: &str, downloads: &Path) -> Browser {
        require("chromium");
        require("chromedriver");
        let driver = Command::new("ip")
            .args(["netns", "exec", netns, "chromedriver"])
            .arg(format!("--port={PORT}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = Scratch::new("chromium-profile");
        let mut b = Browser {
            netns: netns.to_owned(),
            session: String::new(),
            driver,
            _profile: profile,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while b.http("GET", "/status", None).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1440,1200",
            &format!("--user-data-dir={}", b._profile.0.display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": args,
                "prefs": {
                    "download.default_directory": downloads.to_str().expect("utf8"),
                    "download.prompt_for_download": false,
                },
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let v = b.call("POST", "/session", Some(caps));
        b.session = v["sessionId"].as_str().expect("a session id").to_owned();
        b
    }

    /// One WebDriver request: (status, JSON body).
    fn http(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> std::io::Result<(u16, Value)> {
        let mut s = corecap_linux::netdev::in_netns(&self.netns, || {
            Ok(TcpStream::connect(("127.0.0.1", PORT)))
        })
        .map_err(std::io::Error::other)??;
        s.set_read_timeout(Some(Duration::from_secs(120)))?;
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes())?;
        s.write_all(body.as_bytes())?;
        // chromedriver keeps the connection open: the body is read by its length.
        let mut r = std::io::BufReader::new(s);
        let mut head = String::new();
        let mut length = 0;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line)? == 0 {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let end = line == "\r\n";
            head.push_str(&line);
            if end {
                break;
            }
        }
        let mut body = vec![0; length];
        r.read_exact(&mut body)?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Ok((status, json))
    }

    /// A command of the session; its `value`. A WebDriver error fails the test.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self
            .http(method, path, body.as_ref())
            .unwrap_or_else(|e| panic!("webdriver {method} {path}: {e}"));
        assert_eq!(status, 200, "webdriver {method} {path}: {v}");
        v["value"].clone()
    }

    fn cmd(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        self.call(method, &format!("/session/{}{what}", self.session), body)
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({"url": url})));
    }

    /// Runs `script` (a function body; `arguments` are `args`) and returns its value.
    pub fn exec(&self, script: &str, args: Vec<Value>) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// Runs `script`, which ends by calling `done(value)`; returns the value.
    pub fn exec_async(&self, script: &str) -> Value {
        let script = format!("const done = arguments[arguments.length - 1]; {script}");
        self.cmd(
            "POST",
            "/execute/async",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Polls `script` until it returns a truthy value (at most 60 s); returns it.
    pub fn wait(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.exec(script, vec![]);
            let truthy =
                !matches!(&v, Value::Null | Value::Bool(false)) && v != json!("") && v != json!(0);
            if truthy {
                return v;
            }
            if Instant::now() >= deadline {
                panic!(
                    "never happened: {what}; the browser's log: {:?}",
                    self.console()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The element `css` selects (the first).
    pub fn find(&self, css: &str) -> Value {
        let v = self.cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        json!({ELEMENT: v[ELEMENT]})
    }

    fn id(el: &Value) -> String {
        el[ELEMENT].as_str().expect("an element").to_owned()
    }

    /// Clicks `css`.
    pub fn click(&self, css: &str) {
        let el = self.find(css);
        self.cmd(
            "POST",
            &format!("/element/{}/click", Self::id(&el)),
            Some(json!({})),
        );
    }

    /// Clears `css` and types `text` into it.
    pub fn type_into(&self, css: &str, text: &str) {
        let el = Self::id(&self.find(css));
        self.cmd("POST", &format!("/element/{el}/clear"), Some(json!({})));
        self.cmd(
            "POST",
            &format!("/element/{el}/value"),
            Some(json!({"text": text})),
        );
    }

    /// Focuses `css` and sends it `keys`.
    pub fn send_keys(&self, css: &str, keys: &str) {
        let el = Self::id(&self.find(css));
        self.cmd(
            "POST",
            &format!("/element/{el}/value"),
            Some(json!({"text": keys})),
        );
    }

    /// The text of `css` as shown.
    pub fn text(&self, css: &str) -> String {
        let el = Self::id(&self.find(css));
        self.cmd("GET", &format!("/element/{el}/text"), None)
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// Writes a PNG of the window to `path`.
    pub fn screenshot(&self, path: &Path) {
        let v = self.cmd("GET", "/screenshot", None);
        let png = base64_decode(v.as_str().expect("base64"));
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("screenshots folder");
        std::fs::write(path, png).expect("write the screenshot");
    }

    /// The browser's console messages so far: (level, message).
    pub fn console(&self) -> Vec<(String, String)> {
        let v = self.cmd("POST", "/se/log", Some(json!({"type": "browser"})));
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["level"].as_str().unwrap_or("").to_owned(),
                            e["message"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.http("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (what WebDriver's screenshot is), decoded.
fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in s.bytes().filter_map(val) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
