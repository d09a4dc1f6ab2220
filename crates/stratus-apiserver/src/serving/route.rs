//! Routing: a request's path and query to what it is for (a document, a
//! resource request, a node proxy), with kube-apiserver's 404 for any other
//! path.

use serde_json::Value;

use super::keys::Keys;
use crate::error::ApiError;
use crate::openapi;
use crate::serving::discovery;
use crate::state::{Inner, Query, ResourceRequest};

fn not_found_path() -> ApiError {
    let mut err = ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    // kube-apiserver sends empty details here.
    err.details = Some(serde_json::json!({}));
    err
}

/// A routed request.
pub(crate) enum Route {
    /// A plain-text answer with its status.
    Text(u16, &'static str),
    Document(Value),
    /// `/api` or `/apis`: aggregated discovery when the client asks for
    /// it, else the legacy document.
    GroupDiscovery {
        core: bool,
        legacy: Value,
    },
    Resource(ResourceRequest),
    NodeProxy {
        name: String,
        path: String,
    },
    OpenApiV2,
}

fn decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8_lossy()
        .into_owned()
}

fn find_def(inner: &Inner, group: &str, version: &str, plural: &str) -> Option<usize> {
    inner.defs().find(group, version, plural)
}

pub(crate) fn route(
    inner: &Inner,
    keys: &Keys,
    path: &str,
    query: &Query,
    user_agent: &str,
    host: &str,
) -> Result<Route, ApiError> {
    let segs: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let (group, version, rest): (&str, &str, &[&str]) = match s.as_slice() {
        [] => return Ok(Route::Document(discovery::root(&inner.defs().served()))),
        ["version"] => return Ok(Route::Document(crate::version::version())),
        ["healthz" | "readyz" | "livez", ..] => return Ok(Route::Text(200, "ok")),
        ["api"] => {
            return Ok(Route::GroupDiscovery {
                core: true,
                legacy: discovery::api_versions(host),
            });
        }
        ["api", "v1"] => {
            return discovery::resource_list(&inner.defs().served(), "", "v1")
                .map(Route::Document)
                .ok_or_else(not_found_path);
        }
        ["api", "v1", "nodes", name, "proxy", path @ ..] => {
            return Ok(Route::NodeProxy {
                name: (*name).to_owned(),
                path: path.join("/"),
            });
        }
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis"] => {
            return Ok(Route::GroupDiscovery {
                core: false,
                legacy: discovery::group_list(&inner.defs().served()),
            });
        }
        ["apis", g] => {
            return discovery::group(&inner.defs().served(), g)
                .map(Route::Document)
                .ok_or_else(not_found_path);
        }
        ["apis", g, v] => {
            return discovery::resource_list(&inner.defs().served(), g, v)
                .map(Route::Document)
                .ok_or_else(not_found_path);
        }
        // A group version nobody serves is not the API's to answer:
        // kube-apiserver's mux says so in plain text.
        ["apis", g, v, ..] if !inner.defs().serves_group_version(g, v) => {
            return Ok(Route::Text(404, "404 page not found\n"));
        }
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        [".well-known", "openid-configuration"] => {
            return Ok(Route::Document(
                crate::auth::service_account_jwt::openid_configuration(),
            ));
        }
        ["openid", "v1", "jwks"] => return Ok(Route::Document(keys.token_signer.jwks())),
        ["openapi", "v3"] => return Ok(Route::Document(openapi::root(&inner.defs().served()))),
        ["openapi", "v2"] => return Ok(Route::OpenApiV2),
        ["openapi", "v3", "api", v] => {
            return openapi::group_version(inner.defs(), "", v)
                .map(Route::Document)
                .ok_or_else(not_found_path);
        }
        ["openapi", "v3", "apis", g, v] => {
            return openapi::group_version(inner.defs(), g, v)
                .map(Route::Document)
                .ok_or_else(not_found_path);
        }
        _ => return Err(not_found_path()),
    };
    let namespaced_plural =
        |p: &str| find_def(inner, group, version, p).filter(|&i| inner.defs().get(i).namespaced);
    let (def, namespace, name, sub) = match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced_plural(plural).is_some() => {
            let def = namespaced_plural(plural).ok_or_else(not_found_path)?;
            match tail {
                [] => (def, Some(*ns), None, None),
                [name] => (def, Some(*ns), Some(*name), None),
                [name, sub] => (def, Some(*ns), Some(*name), Some(*sub)),
                _ => return Err(not_found_path()),
            }
        }
        [plural, tail @ ..] => {
            let def = find_def(inner, group, version, plural).ok_or_else(not_found_path)?;
            if inner.defs().get(def).namespaced && !tail.is_empty() {
                return Err(not_found_path());
            }
            match tail {
                [] => (def, None, None, None),
                [name] => (def, None, Some(*name), None),
                [name, sub] => (def, None, Some(*name), Some(*sub)),
                _ => return Err(not_found_path()),
            }
        }
        [] => return Err(not_found_path()),
    };
    if let Some(sub) = sub
        && !inner.defs().get(def).subresources.contains(&sub)
    {
        return Err(not_found_path());
    }
    Ok(Route::Resource(ResourceRequest {
        def,
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        sub: sub.map(str::to_owned),
        query: query.clone(),
        user_agent: user_agent.to_owned(),
        user: None,
        warnings: Default::default(),
        conversion: None,
    }))
}
