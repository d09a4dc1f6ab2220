//! The proxy to kubelets, as kube-apiserver runs it: `pods/log`,
//! `pods/exec`, `pods/attach`, `pods/portforward` and `nodes/proxy` go to
//! the kubelet endpoint of the pod's node (its InternalIP, else its
//! ExternalIP or Hostname, and `daemonEndpoints.kubeletEndpoint.Port`),
//! over TLS with the harness's own client certificate
//! (`kube-apiserver-kubelet-client`, signed by [`KubeletClient::ca_pem`]).
//! Streaming upgrades (WebSocket, SPDY) are passed through byte for byte
//! once the kubelet answers 101; other answers stream back as they come.
//!
//! Like kube-apiserver without `--kubelet-certificate-authority`, the
//! harness does not verify the kubelet's serving certificate.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, Method, Request, Response, header};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;

use crate::body::Body;
use crate::error::ApiError;
use crate::kubelet_client::KubeletClient;
use crate::kubelet_client::Target;
use crate::serving::stream_translation::Translation;
use crate::state::Inner;

fn def_of(inner: &Inner, plural: &str) -> Option<usize> {
    inner.defs().core(plural)
}

fn get(inner: &Inner, plural: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
    let def = def_of(inner, plural)?;
    inner.store().get(def, namespace, name).map(|s| s.object)
}

/// `host:port` of a node's kubelet.
fn kubelet_endpoint(inner: &Inner, node: &str) -> Result<(String, u16), ApiError> {
    let obj = get(inner, "nodes", "", node)
        .ok_or_else(|| ApiError::new(404, "NotFound", format!("nodes \"{node}\" not found")))?;
    let addresses = obj
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let address = ["InternalIP", "ExternalIP", "Hostname"]
        .iter()
        .find_map(|kind| {
            addresses
                .iter()
                .find(|a| a.get("type").and_then(Value::as_str) == Some(kind))
                .and_then(|a| a.get("address").and_then(Value::as_str))
        })
        .ok_or_else(|| {
            ApiError::bad_request(format!("node {node} has no address to reach its kubelet"))
        })?;
    let port = obj
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(10250);
    Ok((address.to_owned(), port))
}

/// The container a pod request names, or the pod's only one.
fn container_of(pod: &Value, name: &str, asked: Option<&str>) -> Result<String, ApiError> {
    let names = |key: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let containers = names("containers");
    match asked {
        Some(c)
            if containers.iter().any(|x| x == c)
                || names("initContainers").iter().any(|x| x == c) =>
        {
            Ok(c.to_owned())
        }
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            containers.join(" ")
        ))),
    }
}

fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The kubelet path and query for `target`, and the kubelet's address.
fn locate(
    inner: &Inner,
    target: &Target,
    query: Option<&str>,
) -> Result<((String, u16), String), ApiError> {
    let parsed = crate::state::query_pairs(query);
    match target {
        Target::Node { name, path } => {
            let endpoint = kubelet_endpoint(inner, name)?;
            let mut uri = format!("/{}", path.trim_start_matches('/'));
            if let Some(q) = query.filter(|q| !q.is_empty()) {
                uri.push('?');
                uri.push_str(q);
            }
            Ok((endpoint, uri))
        }
        Target::Pod {
            namespace,
            name,
            sub,
        } => {
            let pod = get(inner, "pods", namespace, name).ok_or_else(|| {
                ApiError::new(404, "NotFound", format!("pods \"{name}\" not found"))
            })?;
            let node = pod
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    ApiError::bad_request(format!("pod {name} does not have a host assigned"))
                })?;
            let endpoint = kubelet_endpoint(inner, node)?;
            let asked = parsed
                .iter()
                .find(|(k, v)| k == "container" && !v.is_empty())
                .map(|(_, v)| v.as_str());
            let (ns, pod_name) = (encode(namespace), encode(name));
            let path = match sub.as_str() {
                "portforward" => format!("/portForward/{ns}/{pod_name}"),
                kind => {
                    let container = encode(&container_of(&pod, name, asked)?);
                    let prefix = match kind {
                        "log" => "containerLogs",
                        "exec" => "exec",
                        _ => "attach",
                    };
                    format!("/{prefix}/{ns}/{pod_name}/{container}")
                }
            };
            let streams = matches!(sub.as_str(), "exec" | "attach");
            let kept: Vec<String> = parsed
                .iter()
                .filter(|(k, _)| k != "container" && k != "insecureSkipTLSVerifyBackend")
                .filter_map(|(k, v)| {
                    // kube-apiserver sends a kubelet the streams it asked
                    // for as `input=1`, `output=1`, `error=1`, `tty=1`
                    // (`api.ExecStdinParam`, ...) and leaves out the rest.
                    let stream = match k.as_str() {
                        "stdin" | "input" => Some("input"),
                        "stdout" | "output" => Some("output"),
                        "stderr" | "error" => Some("error"),
                        "tty" => Some("tty"),
                        _ => None,
                    };
                    if let (true, Some(name)) = (streams, stream) {
                        return match v.as_str() {
                            "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(format!("{name}=1")),
                            "0" | "f" | "F" | "false" | "FALSE" | "False" | "" => None,
                            // Not a boolean: the kubelet says so.
                            other => Some(format!("{name}={}", encode(other))),
                        };
                    }
                    let k = if k == "ports" { "port" } else { k.as_str() };
                    Some(format!("{}={}", encode(k), encode(v)))
                })
                .collect();
            let uri = if kept.is_empty() {
                path
            } else {
                format!("{path}?{}", kept.join("&"))
            };
            Ok((endpoint, uri))
        }
    }
}

/// Headers passed on to the kubelet (and back, for upgrades).
const PASSED: &[&str] = &[
    "upgrade",
    "connection",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
    "sec-websocket-accept",
    "x-stream-protocol-version",
    "accept",
    "content-type",
];

fn backend_error(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(500, "InternalError", format!("error dialing backend: {e}"))
}

/// Proxy one request to its kubelet.
pub(crate) async fn proxy(
    inner: &Arc<Inner>,
    client: &KubeletClient,
    target: Target,
    parts: &http::request::Parts,
    body: Bytes,
    on_upgrade: Option<OnUpgrade>,
) -> Result<Response<Body>, ApiError> {
    let ((host, port), uri) = locate(inner, &target, parts.uri.query())?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| backend_error(format!("dial tcp {host}:{port}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let server_name = ServerName::try_from(host.clone())
        .map_err(|e| backend_error(format!("bad kubelet host {host:?}: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(client.config.clone());
    let tls = connector
        .connect(server_name, tcp)
        .await
        .map_err(|e| backend_error(format!("TLS with kubelet {host}:{port}: {e}")))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(backend_error)?;
    tokio::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let method = if parts.method == Method::HEAD {
        Method::GET
    } else {
        parts.method.clone()
    };
    let mut request = Request::builder().method(method).uri(&uri);
    request = request.header(header::HOST, format!("{host}:{port}"));
    let translation = Translation::of(&target, parts)?;
    match &translation {
        Translation::None => {
            for name in PASSED {
                for value in parts.headers.get_all(*name) {
                    request = request.header(*name, value.clone());
                }
            }
        }
        // kube-apiserver's translation: the client's WebSocket becomes a
        // SPDY upgrade towards the kubelet.
        other => {
            request = request
                .header(header::CONNECTION, "Upgrade")
                .header(header::UPGRADE, "SPDY/3.1")
                .header("x-stream-protocol-version", other.spdy_version());
        }
    }
    let request = request
        .body(Full::new(body))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut answer = sender.send_request(request).await.map_err(backend_error)?;
    if answer.status() == http::StatusCode::SWITCHING_PROTOCOLS {
        let Some(client_side) = on_upgrade else {
            return Err(ApiError::bad_request(
                "the kubelet switched protocols on a request that cannot upgrade",
            ));
        };
        let kubelet_side = hyper::upgrade::on(&mut answer);
        let mut response = Response::new(
            Full::new(Bytes::new())
                .map_err(|e| match e {})
                .boxed_unsync(),
        );
        *response.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
        if !matches!(translation, Translation::None) {
            translation.answer(response.headers_mut());
            tokio::spawn(async move {
                let (Ok(client), Ok(kubelet)) = (client_side.await, kubelet_side.await) else {
                    return;
                };
                translation
                    .run(TokioIo::new(client), TokioIo::new(kubelet))
                    .await;
            });
            return Ok(response);
        }
        for name in PASSED {
            for value in answer.headers().get_all(*name) {
                response.headers_mut().append(*name, value.clone());
            }
        }
        tokio::spawn(async move {
            let (Ok(client), Ok(kubelet)) = (client_side.await, kubelet_side.await) else {
                return;
            };
            let mut client = TokioIo::new(client);
            let mut kubelet = TokioIo::new(kubelet);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut kubelet).await;
        });
        return Ok(response);
    }
    let status = answer.status();
    let content_type = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("text/plain"));
    // A broken kubelet stream ends the answer; errors cannot be reported
    // after the status line.
    let frames = answer
        .into_body()
        .into_data_stream()
        .take_while(|chunk| std::future::ready(chunk.is_ok()))
        .filter_map(|chunk| {
            std::future::ready(chunk.ok().map(|c| Ok::<_, Infallible>(Frame::data(c))))
        });
    let mut response = Response::new(StreamBody::new(frames).boxed_unsync());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn container_defaults_and_checks() {
        let one = json!({"spec": {"containers": [{"name": "app"}]}});
        assert_eq!(container_of(&one, "p", None).unwrap(), "app");
        assert!(container_of(&one, "p", Some("other")).is_err());
        let two = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "init"}]}});
        let err = container_of(&two, "p", None).unwrap_err();
        assert!(
            err.message.contains("choose one of: [a b]"),
            "{}",
            err.message
        );
        assert_eq!(container_of(&two, "p", Some("init")).unwrap(), "init");
    }
}
