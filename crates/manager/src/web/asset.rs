//! The page's files, built into the binary (`crates/manager/web/`): the HTML, its style
//! and its ES modules. No build step makes them, and nothing they load comes from
//! elsewhere: the content policy sent with each lets the page reach its own origin only.

use super::Answer;
use crate::http::Response;

/// The content policy of the page: its own scripts, styles and API, nothing else.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
    frame-ancestors 'none'";

/// The files under `/ui/`: name, content type, bytes.
const FILES: &[(&str, &str, &str)] = &[
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../web/style.css"),
    ),
    ("app.js", JS, include_str!("../../web/app.js")),
    ("api.js", JS, include_str!("../../web/api.js")),
    ("timeline.js", JS, include_str!("../../web/timeline.js")),
    ("recording.js", JS, include_str!("../../web/recording.js")),
    ("search.js", JS, include_str!("../../web/search.js")),
    ("captures.js", JS, include_str!("../../web/captures.js")),
    ("sensors.js", JS, include_str!("../../web/sensors.js")),
];

const JS: &str = "text/javascript; charset=utf-8";

/// The headers every file of the page is sent with.
fn headers() -> Vec<(&'static str, String)> {
    vec![
        ("content-security-policy", POLICY.to_owned()),
        ("x-content-type-options", "nosniff".to_owned()),
        ("referrer-policy", "no-referrer".to_owned()),
        ("cache-control", "no-cache".to_owned()),
    ]
}

/// `GET /` to a browser.
pub fn page() -> Answer {
    let r = Response {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body: include_str!("../../web/index.html").as_bytes().to_vec(),
    };
    let mut h = headers();
    h.push(("x-frame-options", "DENY".to_owned()));
    Answer::Page(r, h)
}

/// `GET /ui/NAME`.
pub fn file(name: &str) -> Answer {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, ty, text)) => {
            let r = Response {
                status: 200,
                content_type: ty,
                body: text.as_bytes().to_vec(),
            };
            Answer::Page(r, headers())
        }
        None => Answer::Page(Response::error(404, format!("no file {name}")), Vec::new()),
    }
}
