//! Every request passes one guard, in this order: the security headers go
//! on every response; the `Host` must be one this listener answers to (DNS
//! rebinding); an `Origin` must be this origin and `Sec-Fetch-Site` must
//! not be cross-site (no CORS, ever: an `OPTIONS` gets 405); `GET /?token=T`
//! with the right token trades it for the cookie; everything else needs the
//! cookie; a `POST` must be JSON. The checks are pure functions of the
//! request's parts ([`Guard::check`]), the middleware only applies them.

use super::Shared;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// The cookie's name.
pub const COOKIE: &str = "drover_web";

/// The Content-Security-Policy of every response: no inline script or style.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What a request without the cookie is told (nothing of the state).
pub const UNAUTHORIZED: &str = "open the URL `drover web` printed";

/// The hosts and scheme a listener answers to.
#[derive(Debug, Clone)]
pub struct Guard {
    hosts: Vec<String>,
    tls: bool,
}

/// What the guard decided about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on to the route.
    Pass,
    /// The right token in the URL: set the cookie and go to `/`.
    TradeToken,
    /// Refused with this status and sentence.
    Refuse(StatusCode, &'static str),
}

/// The host part of a `Host` header (`[::1]:7878` → `[::1]`), lowercased.
pub fn host_part(host: &str) -> String {
    let h = host.trim();
    let name = if h.starts_with('[') {
        h.find(']').map_or(h, |i| &h[..=i])
    } else {
        h.rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(h, |(name, _)| name)
    };
    name.to_ascii_lowercase()
}

fn cookie_value(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The `token` parameter of a query string.
pub fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

impl Guard {
    /// The guard of a listener on `ip`: a loopback listener answers to
    /// `localhost`, `127.0.0.1` and `[::1]` (so an SSH tunnel works), any
    /// other to its own address; plus the operator's `--allow-host` names.
    pub fn new(ip: IpAddr, tls: bool, allow: &[String]) -> Guard {
        let mut hosts: Vec<String> = if ip.is_loopback() {
            vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]
        } else {
            vec![match ip {
                IpAddr::V6(v6) => format!("[{v6}]"),
                IpAddr::V4(v4) => v4.to_string(),
            }]
        };
        hosts.extend(allow.iter().map(|h| host_part(h)));
        Guard { hosts, tls }
    }

    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Decide about a request from its method, path, query and headers
    /// (pure; `token` says whether a given string is the token).
    pub fn check(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        token: &dyn Fn(&str) -> bool,
    ) -> Verdict {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return Verdict::Refuse(StatusCode::BAD_REQUEST, "no Host header");
        };
        if !self.hosts.contains(&host_part(host)) {
            return Verdict::Refuse(StatusCode::FORBIDDEN, "unknown Host");
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let scheme = if self.tls { "https" } else { "http" };
            if origin.as_bytes() != format!("{scheme}://{host}").as_bytes() {
                return Verdict::Refuse(StatusCode::FORBIDDEN, "a request from another origin");
            }
        }
        if let Some(site) = headers.get("sec-fetch-site")
            && !matches!(site.as_bytes(), b"same-origin" | b"none")
        {
            return Verdict::Refuse(StatusCode::FORBIDDEN, "a request from another site");
        }
        if method == Method::OPTIONS {
            return Verdict::Refuse(StatusCode::METHOD_NOT_ALLOWED, "no cross-origin requests");
        }
        if method == Method::GET
            && path == "/"
            && let Some(t) = query_token(query)
        {
            return if token(t) {
                Verdict::TradeToken
            } else {
                Verdict::Refuse(StatusCode::UNAUTHORIZED, UNAUTHORIZED)
            };
        }
        if !cookie_value(headers).is_some_and(token) {
            return Verdict::Refuse(StatusCode::UNAUTHORIZED, UNAUTHORIZED);
        }
        if method == Method::POST {
            let json = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
            if !json {
                return Verdict::Refuse(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "send application/json",
                );
            }
        }
        Verdict::Pass
    }
}

/// An error as `/api/*` speaks it (`{"error": …}`), plain text elsewhere.
pub fn error(path: &str, status: StatusCode, msg: &str) -> Response {
    if path.starts_with("/api/") {
        (status, axum::Json(serde_json::json!({ "error": msg }))).into_response()
    } else {
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{msg}\n"),
        )
            .into_response()
    }
}

fn secure_headers(h: &mut HeaderMap) {
    let set = |h: &mut HeaderMap, k: &'static str, v: &'static str| {
        h.insert(k, HeaderValue::from_static(v));
    };
    set(h, "content-security-policy", CSP);
    set(h, "x-content-type-options", "nosniff");
    set(h, "referrer-policy", "no-referrer");
    set(h, "cache-control", "no-store");
    set(h, "x-frame-options", "DENY");
    h.remove(header::ACCESS_CONTROL_ALLOW_ORIGIN);
}

/// The middleware every route sits behind.
pub async fn guard(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let verdict = s.guard.check(
        req.method(),
        &path,
        req.uri().query(),
        req.headers(),
        &|t| s.token.matches(t),
    );
    let mut resp = match verdict {
        Verdict::Pass => next.run(req).await,
        Verdict::TradeToken => {
            let secure = if s.guard.tls() { "; Secure" } else { "" };
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/{secure}",
                s.token.secret()
            );
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::SEE_OTHER;
            r.headers_mut()
                .insert(header::LOCATION, HeaderValue::from_static("/"));
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Verdict::Refuse(status, msg) => error(&path, status, msg),
    };
    secure_headers(resp.headers_mut());
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            if let Ok(v) = HeaderValue::from_str(v) {
                h.append(*k, v);
            }
        }
        h
    }

    #[test]
    fn host_origin_and_cookie_are_checked_in_turn() {
        let g = Guard::new(IpAddr::from([127, 0, 0, 1]), false, &["box.lan".into()]);
        let ok = |t: &str| t == "secret";
        let get =
            |h: &HeaderMap, path: &str, q: Option<&str>| g.check(&Method::GET, path, q, h, &ok);
        let cookie = "drover_web=secret";
        assert_eq!(
            get(
                &req(&[("host", "localhost:9"), ("cookie", cookie)]),
                "/",
                None
            ),
            Verdict::Pass
        );
        assert_eq!(
            get(&req(&[("host", "box.lan"), ("cookie", cookie)]), "/", None),
            Verdict::Pass
        );
        assert!(matches!(
            get(
                &req(&[("host", "evil.example:7878"), ("cookie", cookie)]),
                "/",
                None
            ),
            Verdict::Refuse(StatusCode::FORBIDDEN, _)
        ));
        assert!(matches!(
            get(&req(&[("cookie", cookie)]), "/", None),
            Verdict::Refuse(StatusCode::BAD_REQUEST, _)
        ));
        let foreign = req(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://evil.example"),
            ("cookie", cookie),
        ]);
        assert!(matches!(
            get(&foreign, "/api/view", None),
            Verdict::Refuse(StatusCode::FORBIDDEN, _)
        ));
        let same = req(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://127.0.0.1:7878"),
            ("sec-fetch-site", "same-origin"),
            ("cookie", cookie),
        ]);
        assert_eq!(get(&same, "/api/view", None), Verdict::Pass);
        let h = req(&[("host", "localhost")]);
        assert_eq!(get(&h, "/", Some("token=secret")), Verdict::TradeToken);
        assert!(matches!(
            get(&h, "/", Some("token=stale")),
            Verdict::Refuse(StatusCode::UNAUTHORIZED, _)
        ));
        assert!(matches!(
            get(&h, "/app.js", None),
            Verdict::Refuse(StatusCode::UNAUTHORIZED, _)
        ));
    }

    #[test]
    fn host_parts_drop_the_port() {
        assert_eq!(host_part("[::1]:7878"), "[::1]");
        assert_eq!(host_part("LocalHost:1"), "localhost");
        assert_eq!(host_part("10.0.0.2"), "10.0.0.2");
    }
}
