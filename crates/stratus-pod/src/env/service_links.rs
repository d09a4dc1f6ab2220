//! Service-link environment variables (`{SVC}_SERVICE_HOST`, Docker link
//! variables), as the kubelet computes them.

use k8s_openapi::api::core::v1::Service;

/// The namespace of the master service.
pub(crate) const MASTER_NAMESPACE: &str = "default";
/// The name of the master service, always linked.
pub(crate) const MASTER_SERVICE: &str = "kubernetes";

fn env_name(s: &str) -> String {
    s.replace('-', "_").to_uppercase()
}

fn is_ip_set(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| !ip.is_empty() && ip != "None")
}

fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The variables for `services` (Go: `envvars.FromServices`), in service
/// order. Services without a cluster IP or without ports add nothing (Go
/// would index an empty port list).
pub(crate) fn from_services(services: &[&Service]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for svc in services {
        if !is_ip_set(svc) {
            continue;
        }
        let Some(spec) = svc.spec.as_ref() else {
            continue;
        };
        let ports = spec.ports.as_deref().unwrap_or_default();
        let Some(first) = ports.first() else { continue };
        let ip = spec.cluster_ip.as_deref().unwrap_or_default();
        let prefix = env_name(svc.metadata.name.as_deref().unwrap_or_default());
        let port_var = format!("{prefix}_SERVICE_PORT");
        out.push((format!("{prefix}_SERVICE_HOST"), ip.to_owned()));
        out.push((port_var.clone(), first.port.to_string()));
        for p in ports {
            if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
                out.push((format!("{port_var}_{}", env_name(name)), p.port.to_string()));
            }
        }
        for (i, p) in ports.iter().enumerate() {
            let protocol = p
                .protocol
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or("TCP");
            let lower = protocol.to_lowercase();
            let url = format!("{lower}://{}", join_host_port(ip, p.port));
            if i == 0 {
                out.push((format!("{prefix}_PORT"), url.clone()));
            }
            let port_prefix = format!("{prefix}_PORT_{}_{}", p.port, protocol.to_uppercase());
            out.push((port_prefix.clone(), url));
            out.push((format!("{port_prefix}_PROTO"), lower));
            out.push((format!("{port_prefix}_PORT"), p.port.to_string()));
            out.push((format!("{port_prefix}_ADDR"), ip.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};

    fn svc(name: &str, ip: &str, ports: &[(Option<&str>, i32, Option<&str>)]) -> Service {
        let mut s = Service::default();
        s.metadata.name = Some(name.into());
        s.spec = Some(ServiceSpec {
            cluster_ip: Some(ip.into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p, proto)| ServicePort {
                        name: n.map(Into::into),
                        port: *p,
                        protocol: proto.map(Into::into),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        s
    }

    #[test]
    fn docker_link_variables() {
        let s = svc(
            "my-db",
            "10.0.0.11",
            &[
                (Some("sql"), 5432, None),
                (Some("metrics"), 9100, Some("UDP")),
            ],
        );
        let vars = from_services(&[&s]);
        let want: Vec<(String, String)> = [
            ("MY_DB_SERVICE_HOST", "10.0.0.11"),
            ("MY_DB_SERVICE_PORT", "5432"),
            ("MY_DB_SERVICE_PORT_SQL", "5432"),
            ("MY_DB_SERVICE_PORT_METRICS", "9100"),
            ("MY_DB_PORT", "tcp://10.0.0.11:5432"),
            ("MY_DB_PORT_5432_TCP", "tcp://10.0.0.11:5432"),
            ("MY_DB_PORT_5432_TCP_PROTO", "tcp"),
            ("MY_DB_PORT_5432_TCP_PORT", "5432"),
            ("MY_DB_PORT_5432_TCP_ADDR", "10.0.0.11"),
            ("MY_DB_PORT_9100_UDP", "udp://10.0.0.11:9100"),
            ("MY_DB_PORT_9100_UDP_PROTO", "udp"),
            ("MY_DB_PORT_9100_UDP_PORT", "9100"),
            ("MY_DB_PORT_9100_UDP_ADDR", "10.0.0.11"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        assert_eq!(vars, want);
    }

    #[test]
    fn headless_portless_and_ipv6() {
        assert!(from_services(&[&svc("h", "None", &[(None, 80, None)])]).is_empty());
        assert!(from_services(&[&svc("e", "", &[(None, 80, None)])]).is_empty());
        assert!(from_services(&[&svc("p", "10.0.0.1", &[])]).is_empty());
        let v6 = from_services(&[&svc("v6", "fd00::1", &[(None, 80, None)])]);
        assert!(v6.contains(&("V6_PORT".to_owned(), "tcp://[fd00::1]:80".to_owned())));
    }
}
