//! A headless Chromium driven over the WebDriver HTTP protocol (chromedriver), with the
//! browser's console log and network log (`goog:loggingPrefs`) for the console's tests.
//! Debian's `chromium` and `chromium-driver` (scripts/browser installs them); without them
//! the test is skipped, or fails when `CI=true`.

use base64::Engine;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// An HTTP client that hands back every status (a 403 is an answer, not an error).
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// chromedriver and one browser session.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: ureq::Agent,
}

/// `chromium` and `chromedriver`, or `None` (skip) — a failure when `CI=true`.
fn programs() -> Option<(PathBuf, PathBuf)> {
    let find = |name: &str| -> Option<PathBuf> {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
    };
    match (find("chromium"), find("chromedriver")) {
        (Some(browser), Some(driver)) => Some((browser, driver)),
        _ => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            assert!(
                !ci,
                "CI=true and chromium/chromedriver are missing: run scripts/browser"
            );
            eprintln!("skipped: chromium/chromedriver not installed (run scripts/browser)");
            None
        }
    }
}

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session.
    pub fn start() -> Option<Browser> {
        let (chromium, chromedriver) = programs()?;
        let port = crate::support::http::free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let http = agent();
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{base}/status")).call().is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--disable-background-networking",
                         "--disable-extensions", "--no-first-run", "--window-size=1280,1000"],
            },
            "goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"},
        }}});
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
            http,
        };
        let created = browser.call("POST", "/session", Some(capabilities));
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Some(browser)
    }

    /// One WebDriver command: its `value`, or a panic naming the error.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let result = self.try_call(method, path, body);
        result.unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// One WebDriver command: its `value`, or the error's JSON.
    fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Value> {
        let url = format!("{}{path}", self.base);
        let response = match method {
            "GET" => self.http.get(&url).call(),
            "DELETE" => self.http.delete(&url).call(),
            _ => self.http.post(&url).send_json(body.unwrap_or(json!({}))),
        };
        let mut response = response.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let ok = response.status().is_success();
        let value: Value = response.body_mut().read_json().unwrap();
        if ok {
            Ok(value["value"].clone())
        } else {
            Err(value["value"].clone())
        }
    }

    fn at(&self, path: &str) -> String {
        format!("/session/{}{path}", self.session)
    }

    /// Navigates and waits for the page to load.
    pub fn open(&self, url: &str) {
        self.call("POST", &self.at("/url"), Some(json!({ "url": url })));
    }

    /// Every element matching a CSS selector (their WebDriver ids).
    pub fn all(&self, css: &str) -> Vec<String> {
        let found = self.call(
            "POST",
            &self.at("/elements"),
            Some(json!({"using": "css selector", "value": css})),
        );
        found
            .as_array()
            .unwrap_or_else(|| panic!("{css}: {found}"))
            .iter()
            .map(|e| {
                let id = e[ELEMENT].as_str().or_else(|| e["ELEMENT"].as_str());
                id.unwrap_or_else(|| panic!("{css}: element {e}"))
                    .to_owned()
            })
            .collect()
    }

    /// The one element matching a CSS selector.
    pub fn one(&self, css: &str) -> String {
        let all = self.all(css);
        assert!(!all.is_empty(), "no {css} on {}", self.url());
        all[0].clone()
    }

    /// The one element matching a CSS selector, waiting up to 10 s for it (after a click
    /// that navigates).
    pub fn wait_one(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(found) = self.all(css).into_iter().next() {
                return found;
            }
            if Instant::now() > deadline {
                let source = self.call("GET", &self.at("/source"), None);
                panic!("no {css} on {} within 10 s:\n{source}", self.url());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// An element's rendered text.
    pub fn text(&self, element: &str) -> String {
        let v = self.call("GET", &self.at(&format!("/element/{element}/text")), None);
        v.as_str().unwrap().to_owned()
    }

    /// Clicks an element (and waits for a navigation it starts).
    pub fn click(&self, element: &str) {
        self.call(
            "POST",
            &self.at(&format!("/element/{element}/click")),
            Some(json!({})),
        );
    }

    /// Clicks an element that loads another page (a link, a form's button) and waits until
    /// that page has loaded: chromedriver may return from the click before the navigation
    /// ends, and reading the page then reads the old one. The old page is marked with a
    /// window property that the new page does not have.
    pub fn click_and_wait(&self, element: &str) {
        self.script("window.__sluiceOldPage = true; return null;");
        self.click(element);
        let deadline = Instant::now() + Duration::from_secs(10);
        let loaded = "return window.__sluiceOldPage === undefined \
                      && document.readyState === 'complete';";
        while self.script(loaded) != Value::Bool(true) {
            assert!(
                Instant::now() < deadline,
                "no new page within 10 s of a click (still at {})",
                self.url()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types into an element.
    pub fn type_into(&self, element: &str, text: &str) {
        let path = self.at(&format!("/element/{element}/value"));
        self.call("POST", &path, Some(json!({ "text": text })));
    }

    /// The current window (tab).
    pub fn window(&self) -> String {
        let handle = self.call("GET", &self.at("/window"), None);
        handle.as_str().unwrap().to_owned()
    }

    /// Opens a new tab and switches to it; returns its handle.
    pub fn new_tab(&self) -> String {
        let body = json!({ "type": "tab" });
        let created = self.call("POST", &self.at("/window/new"), Some(body));
        let handle = created["handle"].as_str().unwrap().to_owned();
        self.switch_to(&handle);
        handle
    }

    /// Switches to a window (tab).
    pub fn switch_to(&self, handle: &str) {
        let body = json!({ "handle": handle });
        self.call("POST", &self.at("/window"), Some(body));
    }

    /// The current URL.
    pub fn url(&self) -> String {
        self.call("GET", &self.at("/url"), None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs a script in the page and returns its value.
    pub fn script(&self, script: &str) -> Value {
        let body = json!({ "script": script, "args": [] });
        self.call("POST", &self.at("/execute/sync"), Some(body))
    }

    /// The text of an open alert, confirm or prompt dialog, if one is open.
    pub fn dialog(&self) -> Option<String> {
        match self.try_call("GET", &self.at("/alert/text"), None) {
            Ok(text) => Some(text.to_string()),
            Err(error) => {
                assert_eq!(error["error"], "no such alert", "{error}");
                None
            }
        }
    }

    /// The browser's console log since the last call (`browser`) or the DevTools events
    /// (`performance`).
    pub fn log(&self, kind: &str) -> Vec<Value> {
        let entries = self.call("POST", &self.at("/se/log"), Some(json!({ "type": kind })));
        entries.as_array().cloned().unwrap_or_default()
    }

    /// Every URL the browser requested since the last call (from the network log).
    pub fn requested_urls(&self) -> Vec<String> {
        self.log("performance")
            .iter()
            .filter_map(|e| serde_json::from_str::<Value>(e["message"].as_str()?).ok())
            .filter(|m| m["message"]["method"] == "Network.requestWillBeSent")
            .filter_map(|m| {
                m["message"]["params"]["request"]["url"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }

    /// Writes a PNG of the viewport.
    pub fn screenshot(&self, path: &Path) {
        let data = self.call("GET", &self.at("/screenshot"), None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(data.as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.try_call("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
