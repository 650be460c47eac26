//! A headless Chromium driven over WebDriver (chromedriver, as a child process killed on
//! drop), with what every page test needs: navigation and form submission that wait for the
//! next page, the HTTP status the page came with, same-origin checks, usability checks at a
//! viewport width, full-page screenshots and an axe-core accessibility run.
//!
//! What the tests need from the machine: `chromedriver` and a Chromium (`chromium`,
//! `chromium-browser` or `google-chrome`) on `PATH` (or named by `VERDICT_CHROMEDRIVER` and
//! `VERDICT_CHROMIUM`), and axe-core's `axe.min.js` named by `VERDICT_AXE_JS`. When one is
//! missing each test says `skipped: ...` on standard error and passes, unless
//! `VERDICT_REQUIRE_BROWSER` is set (CI sets it), when it fails naming what is missing.

use fantoccini::{Client, ClientBuilder, Locator};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One browser at a time: the tests share two cores with everything else.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The viewport widths every page is checked at: a laptop and a phone.
pub const WIDTHS: [u32; 2] = [1280, 390];

/// What the tests need from the machine, found.
struct Needs {
    chromedriver: PathBuf,
    chromium: PathBuf,
    axe_js: String,
}

/// An executable named by `var`, else the first of `names` on `PATH`.
fn executable(var: &str, names: &[&str]) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(var) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "{var} names {}, which is not a file",
                path.display()
            ))
        };
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    names
        .iter()
        .flat_map(|name| dirs.iter().map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("none of {names:?} is on PATH (or set {var})"))
}

fn find_needs() -> Result<Needs, Vec<String>> {
    let chromedriver = executable("VERDICT_CHROMEDRIVER", &["chromedriver"]);
    let chromium = executable(
        "VERDICT_CHROMIUM",
        &["chromium", "chromium-browser", "google-chrome"],
    );
    let axe_js = match std::env::var_os("VERDICT_AXE_JS") {
        None => Err("VERDICT_AXE_JS is not set (the path of axe-core's axe.min.js)".to_owned()),
        Some(path) => std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "VERDICT_AXE_JS names {}, which cannot be read: {e}",
                Path::new(&path).display()
            )
        }),
    };
    match (chromedriver, chromium, axe_js) {
        (Ok(chromedriver), Ok(chromium), Ok(axe_js)) => Ok(Needs {
            chromedriver,
            chromium,
            axe_js,
        }),
        (a, b, c) => Err([a.err(), b.err(), c.err()].into_iter().flatten().collect()),
    }
}

/// chromedriver as a child process in a process group of its own; the group (the browser
/// included) is killed when this is dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    fn start(path: &Path) -> Self {
        use std::os::unix::process::CommandExt as _;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(path)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", path.display()));
        let driver_out = child.stdout.take().unwrap();
        let mut lines = std::io::BufReader::new(driver_out).lines();
        let mut said = Vec::new();
        loop {
            match lines.next() {
                Some(Ok(line)) if line.contains("started successfully") => break,
                Some(Ok(line)) => said.push(line),
                _ => panic!(
                    "{} ended before it was ready; it said: {said:?}",
                    path.display()
                ),
            }
        }
        // Keep reading what it says, so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The browser is in the driver's process group: kill the whole group.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A violation axe-core reported.
#[derive(Debug, Deserialize)]
pub struct Violation {
    pub id: String,
    pub impact: Option<String>,
    pub help: String,
    pub targets: Vec<Value>,
}

/// A browser driven over WebDriver, the server's origin and the folder screenshots go to.
pub struct Browser {
    pub client: Client,
    pub origin: String,
    axe_js: String,
    shots: PathBuf,
    // Dropped after the browser is closed (or abandoned by a failing test).
    _profile: tempfile::TempDir,
    _driver: Driver,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Browser {
    /// A browser for `test`, or `None` (after saying why on standard error) when the machine
    /// lacks what it needs and `VERDICT_REQUIRE_BROWSER` is unset. With it set, a missing
    /// piece fails the test.
    pub async fn start(test: &str) -> Option<Self> {
        let needs = match find_needs() {
            Ok(needs) => needs,
            Err(missing) => {
                let missing = missing.join("; ");
                assert!(
                    std::env::var_os("VERDICT_REQUIRE_BROWSER").is_none(),
                    "{test}: VERDICT_REQUIRE_BROWSER is set but the browser tests cannot run: {missing}"
                );
                say(&format!("{test}: skipped: {missing}"));
                return None;
            }
        };
        let turn = ONE_AT_A_TIME.lock().await;
        let driver = Driver::start(&needs.chromedriver);
        let profile = tempfile::tempdir().unwrap();
        let [width, _] = WIDTHS;
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": needs.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    format!("--window-size={width},900"),
                    format!("--user-data-dir={}", profile.path().display()),
                    // Nothing but the server on loopback: every other name fails to resolve,
                    // and the browser's own background traffic is off.
                    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                    "--no-first-run",
                    "--no-default-browser-check",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-default-apps",
                    "--disable-extensions",
                    "--disable-sync",
                ],
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("an object literal")
        };
        // Two providers are built in (see Cargo.toml); the first test to get here picks ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = ClientBuilder::rustls()
            .unwrap()
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", driver.port))
            .await
            .unwrap_or_else(|e| panic!("{test}: no browser: {e}"));
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        Some(Self {
            client,
            origin: String::new(),
            axe_js: needs.axe_js,
            shots,
            _profile: profile,
            _driver: driver,
            _turn: turn,
        })
    }

    /// Closes the browser (the driver and its browser are killed when `self` is dropped).
    pub async fn close(self) {
        let Self { client, .. } = self;
        client.close().await.unwrap();
    }

    /// Forgets every cookie (signs out without the form) and points at a new server.
    pub async fn reset(&mut self, origin: &str) {
        self.origin = origin.to_owned();
        // Cookies are deleted for the page shown, and the pages' cookies have `Path=/ui`
        // (and, as cookies do, outlive a change of port): show a page under it first.
        self.client
            .goto(&format!("{origin}/ui/assets/ui.css"))
            .await
            .unwrap();
        self.client.delete_all_cookies().await.unwrap();
    }

    /// Opens `path` on the server.
    pub async fn goto(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.origin))
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    }

    /// The path of the page shown.
    pub async fn path(&self) -> String {
        self.client.current_url().await.unwrap().path().to_owned()
    }

    /// Runs `script` in the page and returns its value.
    pub async fn js(&self, script: &str) -> Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// The HTTP status the page shown came with.
    pub async fn status(&self) -> u16 {
        let v = self
            .js("return performance.getEntriesByType('navigation')[0].responseStatus;")
            .await;
        let path = self.path().await;
        v.as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or_else(|| panic!("no response status for {path}: {v}"))
    }

    /// The elements matching `css`.
    pub async fn all(&self, css: &str) -> Vec<fantoccini::elements::Element> {
        self.client.find_all(Locator::Css(css)).await.unwrap()
    }

    /// The one element matching `css`; fails naming the page when there is none or more.
    pub async fn one(&self, css: &str) -> fantoccini::elements::Element {
        let mut found = self.all(css).await;
        let path = self.path().await;
        assert_eq!(
            found.len(),
            1,
            "{path}: expected exactly one {css:?}, found {}",
            found.len()
        );
        found.pop().unwrap()
    }

    /// The trimmed text of the one element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.one(css).await.text().await.unwrap().trim().to_owned()
    }

    /// Clicks the one element matching `css` and waits for the page it leads to.
    pub async fn click_and_wait(&self, css: &str) {
        self.js("window.__verdictOldPage = true; return null;")
            .await;
        self.one(css).await.click().await.unwrap();
        self.wait_for_new_page().await;
    }

    /// Waits until the page marked by [`Browser::click_and_wait`] has been replaced and the
    /// new one has loaded.
    pub async fn wait_for_new_page(&self) {
        // A bound against a page that never comes, not a measurement.
        for _ in 0..600 {
            let v = self
                .client
                .execute(
                    "return window.__verdictOldPage === undefined && document.readyState === 'complete';",
                    vec![],
                )
                .await;
            if matches!(v, Ok(Value::Bool(true))) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no new page after 30 s at {}", self.path().await);
    }

    /// Asserts that every request the page made went to the server's origin and that the
    /// page names no other origin in an attribute that fetches or links.
    pub async fn assert_only_the_servers_origin(&self) {
        let path = self.path().await;
        let requested = self
            .js("return performance.getEntriesByType('navigation')
                    .concat(performance.getEntriesByType('resource'))
                    .map(e => e.name);")
            .await;
        let linked = self
            .js("const out = [];
                 for (const el of document.querySelectorAll('*')) {
                   for (const a of ['src', 'href', 'action', 'formaction', 'srcset', 'poster', 'data', 'xlink:href', 'ping', 'cite', 'background']) {
                     const v = el.getAttribute(a);
                     if (v === null) continue;
                     for (const part of (a === 'srcset' ? v.split(',').map(s => s.trim().split(' ')[0]) : [v])) {
                       out.push(new URL(part, document.baseURI).href);
                     }
                   }
                 }
                 for (const el of document.querySelectorAll('[style]')) out.push(el.getAttribute('style'));
                 for (const s of document.querySelectorAll('style')) out.push(s.textContent);
                 return out;")
            .await;
        let mut foreign = Vec::new();
        for url in requested
            .as_array()
            .unwrap()
            .iter()
            .chain(linked.as_array().unwrap())
        {
            let url = url.as_str().unwrap_or_default();
            let is_ours = url.starts_with(&format!("{}/", self.origin)) || url == self.origin;
            let is_fetchable = url.starts_with("http") || url.starts_with("//");
            let css_fetches = url.contains("url(") || url.contains("@import");
            if (is_fetchable && !is_ours) || (css_fetches && has_foreign_url(url, &self.origin)) {
                foreign.push(url.to_owned());
            }
        }
        assert!(
            foreign.is_empty(),
            "{path}: the page reaches beyond the server: {foreign:?}"
        );
        // And in the HTML as sent: no absolute URL but the server's and XML namespaces.
        let html = self.client.source().await.unwrap();
        let external: Vec<&str> = html
            .match_indices("://")
            .filter_map(|(i, _)| {
                let start = html[..i]
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '-'))
                    .map_or(0, |s| s + 1);
                let end = html[i..]
                    .find(|c: char| c.is_whitespace() || "\"'<>)".contains(c))
                    .map_or(html.len(), |e| i + e);
                let url = &html[start..end];
                (!url.starts_with(&self.origin) && !url.starts_with("http://www.w3.org/"))
                    .then_some(url)
            })
            .collect();
        assert!(
            external.is_empty(),
            "{path}: the HTML names external URLs: {external:?}"
        );
    }

    /// Sets the viewport to `width`; then, when the page scrolls sideways, says by how much.
    pub async fn resize_and_check_overflow(&self, width: u32) -> Option<String> {
        self.client.set_window_size(width, 900).await.unwrap();
        let sizes = self
            .js("return [document.documentElement.scrollWidth, window.innerWidth];")
            .await;
        let (scroll, inner) = (sizes[0].as_u64().unwrap(), sizes[1].as_u64().unwrap());
        assert_eq!(
            inner,
            u64::from(width),
            "the browser did not take a {width} px viewport"
        );
        (scroll > inner)
            .then(|| format!("the page is {scroll} px wide, wider than the {inner} px viewport"))
    }

    /// When the one element matching `css` is not shown, disabled, or not what a click at its
    /// centre lands on once scrolled into view, says why.
    pub async fn not_clickable(&self, css: &str) -> Option<String> {
        let el = self.one(css).await;
        if !el.is_displayed().await.unwrap() {
            return Some(format!("{css} is not shown"));
        }
        if !el.is_enabled().await.unwrap() {
            return Some(format!("{css} is disabled"));
        }
        let hit = self
            .client
            .execute(
                "const el = arguments[0];
                 el.scrollIntoView({block: 'center', inline: 'center'});
                 const r = el.getBoundingClientRect();
                 if (r.width === 0 || r.height === 0) return 'it has no size';
                 if (r.left < 0 || r.right > window.innerWidth) return 'it is cut off at the side';
                 const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
                 return at !== null && (at === el || el.contains(at)) ? 'ok' : 'something covers it: ' + (at && at.outerHTML.slice(0, 80));",
                vec![serde_json::to_value(&el).unwrap()],
            )
            .await
            .unwrap();
        (hit != "ok").then(|| format!("{css} cannot be clicked: {hit}"))
    }

    /// Saves a screenshot of the whole page at `width` as `NAME-WIDTH.png`.
    pub async fn screenshot(&self, name: &str, width: u32) {
        // The window's height is the page's plus what the window keeps for itself.
        let sizes = self
            .js("return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight];")
            .await;
        let (page, frame) = (sizes[0].as_u64().unwrap(), sizes[1].as_u64().unwrap());
        let height = u32::try_from((page + frame).clamp(600, 8000)).unwrap();
        self.client.set_window_size(width, height).await.unwrap();
        let png = self.client.screenshot().await.unwrap();
        self.client.set_window_size(width, 900).await.unwrap();
        let file = self.shots.join(format!("{name}-{width}.png"));
        std::fs::write(&file, png).unwrap();
    }

    /// The folder screenshots are written to.
    pub fn screenshots(&self) -> &Path {
        &self.shots
    }

    /// Runs axe-core on the page shown and returns its violations of impact `serious` or
    /// `critical`.
    pub async fn axe_serious(&self) -> Vec<Violation> {
        // Defined on the page's window once per page; WebDriver's scripts are not subject to
        // the page's content security policy (which allows no script at all).
        if self.js("return typeof window.axe;").await != "object" {
            self.client
                .execute(
                    &format!("{}\nreturn typeof window.axe;", self.axe_js),
                    vec![],
                )
                .await
                .unwrap();
        }
        let found = self
            .client
            .execute_async(
                "const done = arguments[arguments.length - 1];
                 window.axe.run(document, {resultTypes: ['violations']})
                   .then(r => done(r.violations.map(v => ({
                      id: v.id, impact: v.impact, help: v.help,
                      targets: v.nodes.map(n => n.target)}))))
                   .catch(e => done({error: String(e)}));",
                vec![],
            )
            .await
            .unwrap();
        assert!(found.get("error").is_none(), "axe failed: {found}");
        let all: Vec<Violation> = serde_json::from_value(found).unwrap();
        all.into_iter()
            .filter(|v| matches!(v.impact.as_deref(), Some("serious" | "critical")))
            .collect()
    }
}

/// Writes a line to standard error past the test harness's capture, so it shows on a
/// passing run too.
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Whether CSS text names a `url(...)` or `@import` outside `origin` (relative ones are the
/// server's).
fn has_foreign_url(css: &str, origin: &str) -> bool {
    css.match_indices("url(")
        .map(|(i, _)| css[i + 4..].trim_start_matches(['"', '\'', ' ']).to_owned())
        .chain(css.match_indices("@import").map(|(i, _)| {
            css[i + 7..]
                .trim_start_matches([' ', '"', '\''])
                .trim_start_matches("url(")
                .trim_start_matches(['"', '\''])
                .to_owned()
        }))
        .any(|u| (u.starts_with("http") || u.starts_with("//")) && !u.starts_with(origin))
}
