//! The usage dashboard: a static page and its assets, compiled into the binary, served at
//! `GET /` and `GET /dashboard` (docs/dashboard.md).
//!
//! The page holds no data of its own: it asks for a service key and reads every figure from
//! the public API (`POST /api/v1/...` and `GET /api/v2/...`) with `Authorization: Bearer`.
//! The assets are the files of `usage-server/assets/`, read at compile time
//! (`include_bytes!`), so the server needs no files and no build step at run time.
//! They are not in the OpenAPI document, which describes the JSON API only.

use warp::http::{HeaderValue, Method, StatusCode, header};
use warp::reply::Response;

use crate::error::ApiError;

/// One file of the dashboard.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// The path it is served at.
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
}

const INDEX: &[u8] = include_bytes!("../../assets/dashboard/index.html");

/// Every path the dashboard serves, each with its file.
pub const ASSETS: [Asset; 7] = [
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: INDEX,
    },
    Asset {
        path: "/dashboard",
        content_type: "text/html; charset=utf-8",
        body: INDEX,
    },
    Asset {
        path: "/dashboard/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../assets/dashboard/app.js"),
    },
    Asset {
        path: "/dashboard/app.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../assets/dashboard/app.css"),
    },
    Asset {
        path: "/dashboard/uPlot.iife.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../assets/vendor/uPlot.iife.min.js"),
    },
    Asset {
        path: "/dashboard/uPlot.min.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../assets/vendor/uPlot.min.css"),
    },
    Asset {
        path: "/dashboard/uPlot.LICENSE.txt",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../../assets/vendor/uPlot.LICENSE"),
    },
];

/// The `Content-Security-Policy` of every dashboard answer: scripts, styles and requests
/// only from the server itself; no inline script, no framing, no plugins.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The dashboard file served at `path` (exact case, no trailing slash), if any.
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// `GET`/`HEAD` of a dashboard file (405 with `Allow: GET, HEAD` for other methods).
pub(super) fn response(asset: &Asset, method: &Method) -> Result<Response, ApiError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(super::method_not_allowed(method, asset.path, "GET, HEAD"));
    }
    let mut res = Response::new(asset.body.into());
    *res.status_mut() = StatusCode::OK;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    // The files change with the binary: revalidate each time (they are small).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_exact() {
        assert_eq!(asset("/").map(|a| a.body), Some(INDEX));
        assert_eq!(asset("/dashboard").map(|a| a.body), Some(INDEX));
        assert_eq!(
            asset("/dashboard/app.js").map(|a| a.content_type),
            Some("text/javascript; charset=utf-8")
        );
        for p in [
            "/dashboard/",
            "/Dashboard",
            "/dashboard/nope.js",
            "/app.js",
            "",
        ] {
            assert!(asset(p).is_none(), "{p}");
        }
    }

    #[test]
    fn the_page_loads_only_its_own_files() {
        let page = std::str::from_utf8(INDEX).unwrap();
        for src in ["/dashboard/app.js", "/dashboard/uPlot.iife.min.js"] {
            assert!(page.contains(&format!("src=\"{src}\"")), "{src}");
            assert!(asset(src).is_some());
        }
        for css in ["/dashboard/app.css", "/dashboard/uPlot.min.css"] {
            assert!(page.contains(&format!("href=\"{css}\"")), "{css}");
            assert!(asset(css).is_some());
        }
        // No inline script or style (the CSP would block them) and nothing remote.
        assert!(
            !page.contains("<script>") && !page.contains("<style") && !page.contains(" style=")
        );
        assert!(!page.contains("http://") && !page.contains("https://"));
    }
}
