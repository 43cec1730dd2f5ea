//! The rendered API reference at `GET /docs` (docs/openapi.md): Swagger UI, vendored from
//! npm (`usage-server/assets/vendor/`), rendering this server's `/openapi.json`.
//!
//! Its files are compiled in like the dashboard's and served the dashboard's way
//! (`dashboard::response`, [`super::dashboard::CSP`]: the same CSP, no inline script or style, nothing from
//! a CDN). Like the dashboard, the page is not in the OpenAPI document.

use super::dashboard::Asset;

/// The path of the page.
pub const PATH: &str = "/docs";

/// Every path the reference serves, each with its file.
pub const ASSETS: [Asset; 7] = [
    Asset {
        path: PATH,
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../../assets/reference/index.html"),
    },
    Asset {
        path: "/docs/reference.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../assets/reference/reference.js"),
    },
    Asset {
        path: "/docs/swagger-ui-bundle.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../assets/vendor/swagger-ui-bundle.js"),
    },
    Asset {
        path: "/docs/swagger-ui.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../assets/vendor/swagger-ui.css"),
    },
    Asset {
        path: "/docs/swagger-ui.LICENSE.txt",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../../assets/vendor/swagger-ui.LICENSE"),
    },
    Asset {
        path: "/docs/swagger-ui.NOTICE.txt",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../../assets/vendor/swagger-ui.NOTICE"),
    },
    // The bundle's first line points here (`see swagger-ui-bundle.js.LICENSE.txt`).
    Asset {
        path: "/docs/swagger-ui-bundle.js.LICENSE.txt",
        content_type: "text/plain; charset=utf-8",
        body: include_bytes!("../../assets/vendor/swagger-ui-bundle.js.LICENSE.txt"),
    },
];

/// The reference's file served at `path` (exact case, no trailing slash), if any.
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_exact() {
        assert_eq!(
            asset("/docs").map(|a| a.content_type),
            Some("text/html; charset=utf-8")
        );
        for p in [
            "/docs/",
            "/Docs",
            "/docs/nope.js",
            "/reference.js",
            "/docs/index.html",
        ] {
            assert!(asset(p).is_none(), "{p}");
        }
    }

    #[test]
    fn the_page_loads_only_its_own_files() {
        let page = std::str::from_utf8(ASSETS[0].body).unwrap();
        for src in ["/docs/swagger-ui-bundle.js", "/docs/reference.js"] {
            assert!(page.contains(&format!("src=\"{src}\"")), "{src}");
            assert!(asset(src).is_some());
        }
        assert!(page.contains("href=\"/docs/swagger-ui.css\""));
        // No inline script or style (the CSP would block them) and nothing remote.
        assert!(
            !page.contains("<script>") && !page.contains("<style") && !page.contains(" style=")
        );
        assert!(!page.contains("http://") && !page.contains("https://"));
        // The script renders this server's document, and sends it nowhere to be validated.
        let script = std::str::from_utf8(asset("/docs/reference.js").unwrap().body).unwrap();
        assert!(script.contains(&format!("url: \"{}\"", super::super::openapi::PATH)));
        assert!(script.contains("validatorUrl: null"));
    }
}
