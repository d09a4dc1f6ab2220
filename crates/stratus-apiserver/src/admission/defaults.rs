//! Defaulting and allocation, as the API server's defaulters, registries
//! and admission plugins do it for the objects controllers rely on.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::error::Cause;
use crate::meta::{at, default_at, set_at, str_at};

/// The service cluster IP range: 10.96.0.0/12.
const SERVICE_CIDR_BASE: u32 = 0x0A60_0000;
const SERVICE_CIDR_SIZE: u32 = 1 << 20;
/// The node-port range: 30000-32767.
pub(crate) const NODE_PORT_MIN: u16 = 30000;
pub(crate) const NODE_PORT_MAX: u16 = 32767;

/// The cluster-IP and node-port allocators.
#[derive(Default)]
pub(crate) struct Allocators {
    inner: Mutex<AllocState>,
}

#[derive(Default)]
struct AllocState {
    ips: BTreeSet<u32>,
    next_ip: u32,
    ports: BTreeSet<u16>,
    next_port: u16,
}

fn ip_offset(ip: &str) -> Option<u32> {
    let ip: Ipv4Addr = ip.parse().ok()?;
    let v = u32::from(ip);
    (SERVICE_CIDR_BASE..SERVICE_CIDR_BASE + SERVICE_CIDR_SIZE)
        .contains(&v)
        .then(|| v - SERVICE_CIDR_BASE)
}

impl Allocators {
    fn lock(&self) -> std::sync::MutexGuard<'_, AllocState> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserve `ip`, or the next free one when `None`.
    fn cluster_ip(&self, wanted: Option<&str>) -> Result<String, String> {
        let mut s = self.lock();
        if let Some(ip) = wanted {
            let off = ip_offset(ip).ok_or(
                "provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/12",
            )?;
            if !s.ips.insert(off) {
                return Err("provided IP is already allocated".to_owned());
            }
            return Ok(ip.to_owned());
        }
        // 10.96.0.1 is the kubernetes service; start after it.
        for _ in 0..SERVICE_CIDR_SIZE {
            s.next_ip = (s.next_ip % (SERVICE_CIDR_SIZE - 2)) + 1;
            let candidate = s.next_ip;
            if candidate > 1 && s.ips.insert(candidate) {
                return Ok(Ipv4Addr::from(SERVICE_CIDR_BASE + candidate).to_string());
            }
        }
        Err("range is full".to_owned())
    }

    fn node_port(&self, wanted: Option<u16>) -> Result<u16, String> {
        let mut s = self.lock();
        if let Some(p) = wanted {
            if !(NODE_PORT_MIN..=NODE_PORT_MAX).contains(&p) {
                return Err(format!(
                    "provided port is not in the valid range. The range of valid ports is {NODE_PORT_MIN}-{NODE_PORT_MAX}"
                ));
            }
            if !s.ports.insert(p) {
                return Err("provided port is already allocated".to_owned());
            }
            return Ok(p);
        }
        let span = NODE_PORT_MAX - NODE_PORT_MIN + 1;
        for _ in 0..span {
            s.next_port = (s.next_port + 1) % span;
            let candidate = NODE_PORT_MIN + s.next_port;
            if s.ports.insert(candidate) {
                return Ok(candidate);
            }
        }
        Err("range is full".to_owned())
    }

    /// Release everything a Service holds.
    pub(crate) fn release_service(&self, svc: &Value) {
        let mut s = self.lock();
        if let Some(off) = str_at(svc, &["spec", "clusterIP"]).and_then(ip_offset) {
            s.ips.remove(&off);
        }
        for port in node_ports(svc) {
            s.ports.remove(&port);
        }
        if let Some(p) = at(svc, &["spec", "healthCheckNodePort"]).and_then(Value::as_u64) {
            s.ports.remove(&(p as u16));
        }
    }
}

fn node_ports(svc: &Value) -> Vec<u16> {
    at(svc, &["spec", "ports"])
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| p.get("nodePort").and_then(Value::as_u64))
                .map(|p| p as u16)
                .collect()
        })
        .unwrap_or_default()
}

fn image_pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    let tagged = last.contains(':') && !last.ends_with(":latest");
    if image.contains('@') || tagged {
        "IfNotPresent"
    } else {
        "Always"
    }
}

pub(crate) fn default_containers(pod: &mut Value, field: &str) {
    let Some(list) = pod
        .get_mut("spec")
        .and_then(|s| s.get_mut(field))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in list {
        let image = c
            .get("image")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        default_at(c, &["imagePullPolicy"], json!(image_pull_policy(&image)));
        default_at(
            c,
            &["terminationMessagePath"],
            json!("/dev/termination-log"),
        );
        default_at(c, &["terminationMessagePolicy"], json!("File"));
        default_at(c, &["resources"], json!({}));
        if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports {
                default_at(p, &["protocol"], json!("TCP"));
            }
        }
    }
}

fn qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = at(pod, &["spec", "containers"])
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        let limits = at(c, &["resources", "limits"]).and_then(Value::as_object);
        let requests = at(c, &["resources", "requests"]).and_then(Value::as_object);
        if limits.is_some_and(|m| !m.is_empty()) || requests.is_some_and(|m| !m.is_empty()) {
            any = true;
        }
        for res in ["cpu", "memory"] {
            let l = limits.and_then(|m| m.get(res));
            let r = requests.and_then(|m| m.get(res)).or(l);
            if l.is_none() || r != l {
                guaranteed = false;
            }
        }
    }
    if guaranteed {
        "Guaranteed"
    } else if any {
        "Burstable"
    } else {
        "BestEffort"
    }
}

/// Default a new Pod as the defaulters and admission plugins do.
/// A Secret's `stringData` is merged into `data` (base64) and dropped, as
/// kube-apiserver does on every write; `stringData` wins on a shared key.
pub(crate) fn secret(secret: &mut Value) {
    use base64::Engine;
    let Some(obj) = secret.as_object_mut() else {
        return;
    };
    let Some(Value::Object(string_data)) = obj.remove("stringData") else {
        return;
    };
    let data = obj
        .entry("data")
        .or_insert_with(|| Value::Object(Default::default()));
    if !data.is_object() {
        *data = Value::Object(Default::default());
    }
    if let Some(data) = data.as_object_mut() {
        for (key, value) in string_data {
            if let Some(text) = value.as_str() {
                let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                data.insert(key, Value::String(encoded));
            }
        }
    }
}

pub(crate) fn pod(pod: &mut Value) {
    default_at(pod, &["spec", "restartPolicy"], json!("Always"));
    default_at(pod, &["spec", "terminationGracePeriodSeconds"], json!(30));
    default_at(pod, &["spec", "dnsPolicy"], json!("ClusterFirst"));
    default_at(pod, &["spec", "schedulerName"], json!("default-scheduler"));
    default_at(pod, &["spec", "securityContext"], json!({}));
    default_at(pod, &["spec", "enableServiceLinks"], json!(true));
    default_at(pod, &["spec", "priority"], json!(0));
    default_at(
        pod,
        &["spec", "preemptionPolicy"],
        json!("PreemptLowerPriority"),
    );
    default_at(pod, &["spec", "serviceAccountName"], json!("default"));
    let sa = str_at(pod, &["spec", "serviceAccountName"])
        .unwrap_or("default")
        .to_owned();
    default_at(pod, &["spec", "serviceAccount"], json!(sa));
    // DefaultTolerationSeconds admission.
    let tolerations = at(pod, &["spec", "tolerations"])
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut tolerations = tolerations;
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        if !tolerations
            .iter()
            .any(|t| t.get("key").and_then(Value::as_str) == Some(key))
        {
            tolerations.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
    set_at(pod, &["spec", "tolerations"], Value::Array(tolerations));
    default_containers(pod, "containers");
    default_containers(pod, "initContainers");
    let qos = qos_class(pod);
    set_at(pod, &["status", "phase"], json!("Pending"));
    set_at(pod, &["status", "qosClass"], json!(qos));
}

/// Default a new Namespace.
pub(crate) fn namespace(ns: &mut Value) {
    let name = str_at(ns, &["metadata", "name"])
        .unwrap_or_default()
        .to_owned();
    set_at(
        ns,
        &["metadata", "labels", "kubernetes.io/metadata.name"],
        json!(name),
    );
    default_at(ns, &["spec", "finalizers"], json!(["kubernetes"]));
    set_at(ns, &["status", "phase"], json!("Active"));
}

fn service_type(svc: &Value) -> String {
    str_at(svc, &["spec", "type"])
        .unwrap_or("ClusterIP")
        .to_owned()
}

/// Default and allocate a Service on create, or on update (`old` given:
/// allocations carry over, new ones are made for type changes).
pub(crate) fn service(
    svc: &mut Value,
    old: Option<&Value>,
    alloc: &Allocators,
) -> Result<(), Vec<Cause>> {
    default_at(svc, &["spec", "type"], json!("ClusterIP"));
    default_at(svc, &["spec", "sessionAffinity"], json!("None"));
    if str_at(svc, &["spec", "sessionAffinity"]) == Some("ClientIP") {
        // Three hours, as kube-apiserver's defaulting.
        default_at(
            svc,
            &[
                "spec",
                "sessionAffinityConfig",
                "clientIP",
                "timeoutSeconds",
            ],
            json!(10800),
        );
    }
    let ty = service_type(svc);
    if ty == "ExternalName" {
        return Ok(());
    }
    default_at(svc, &["spec", "internalTrafficPolicy"], json!("Cluster"));
    if ty == "NodePort" || ty == "LoadBalancer" {
        default_at(svc, &["spec", "externalTrafficPolicy"], json!("Cluster"));
    } else if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("externalTrafficPolicy");
    }
    if ty == "LoadBalancer" {
        default_at(svc, &["spec", "allocateLoadBalancerNodePorts"], json!(true));
    }
    let mut causes = Vec::new();

    // Cluster IP: carried over on update, allocated on create.
    let old_ip = old
        .and_then(|o| str_at(o, &["spec", "clusterIP"]))
        .map(str::to_owned);
    let wanted = str_at(svc, &["spec", "clusterIP"])
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    match (old_ip, wanted) {
        (Some(old_ip), Some(new_ip)) if old_ip != new_ip => causes.push(Cause::invalid(
            "spec.clusterIPs[0]",
            &new_ip,
            "may not change once set",
        )),
        (Some(old_ip), _) => set_at(svc, &["spec", "clusterIP"], json!(old_ip)),
        (None, Some(ip)) if ip == "None" => {}
        (None, wanted) => match alloc.cluster_ip(wanted.as_deref()) {
            Ok(ip) => set_at(svc, &["spec", "clusterIP"], json!(ip)),
            Err(e) => causes.push(Cause::invalid(
                "spec.clusterIPs",
                wanted.as_deref().unwrap_or(""),
                &e,
            )),
        },
    }
    let ip = str_at(svc, &["spec", "clusterIP"])
        .unwrap_or_default()
        .to_owned();
    if !ip.is_empty() {
        set_at(svc, &["spec", "clusterIPs"], json!([ip]));
        if ip != "None" {
            default_at(svc, &["spec", "ipFamilies"], json!(["IPv4"]));
            default_at(svc, &["spec", "ipFamilyPolicy"], json!("SingleStack"));
        }
    }

    // Ports: protocol, targetPort, node ports.
    let wants_node_ports = ty == "NodePort"
        || (ty == "LoadBalancer"
            && at(svc, &["spec", "allocateLoadBalancerNodePorts"]) != Some(&json!(false)));
    let old_ports: Vec<(i64, String, Option<u64>)> = old
        .and_then(|o| at(o, &["spec", "ports"]))
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    (
                        p.get("port").and_then(Value::as_i64).unwrap_or(0),
                        p.get("protocol")
                            .and_then(Value::as_str)
                            .unwrap_or("TCP")
                            .to_owned(),
                        p.get("nodePort").and_then(Value::as_u64),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(ports) = svc
        .get_mut("spec")
        .and_then(|s| s.get_mut("ports"))
        .and_then(Value::as_array_mut)
    {
        for (i, p) in ports.iter_mut().enumerate() {
            default_at(p, &["protocol"], json!("TCP"));
            if let Some(port) = p.get("port").cloned() {
                default_at(p, &["targetPort"], port);
            }
            if !wants_node_ports {
                if let Some(m) = p.as_object_mut() {
                    m.remove("nodePort");
                }
                continue;
            }
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let proto = p
                .get("protocol")
                .and_then(Value::as_str)
                .unwrap_or("TCP")
                .to_owned();
            let given = p
                .get("nodePort")
                .and_then(Value::as_u64)
                .filter(|n| *n != 0);
            let previous = old_ports
                .iter()
                .find(|(op, opr, _)| *op == port && *opr == proto)
                .and_then(|(_, _, n)| *n);
            let result = match (given, previous) {
                (Some(g), Some(prev)) if g == prev => Ok(g as u16),
                (None, Some(prev)) => Ok(prev as u16),
                (g, _) => alloc.node_port(g.and_then(|g| u16::try_from(g).ok())),
            };
            match result {
                Ok(n) => {
                    if let Some(m) = p.as_object_mut() {
                        m.insert("nodePort".into(), json!(n));
                    }
                }
                Err(e) => causes.push(Cause::invalid(
                    format!("spec.ports[{i}].nodePort"),
                    &given.map(|g| g.to_string()).unwrap_or_default(),
                    &e,
                )),
            }
        }
    }

    // Health-check node port for LoadBalancer + Local.
    let local = str_at(svc, &["spec", "externalTrafficPolicy"]) == Some("Local");
    if ty == "LoadBalancer" && local {
        let given = at(svc, &["spec", "healthCheckNodePort"])
            .and_then(Value::as_u64)
            .filter(|n| *n != 0);
        let previous = old
            .and_then(|o| at(o, &["spec", "healthCheckNodePort"]))
            .and_then(Value::as_u64);
        let result = match (given, previous) {
            (Some(g), Some(p)) if g == p => Ok(g as u16),
            (None, Some(p)) => Ok(p as u16),
            (g, _) => alloc.node_port(g.and_then(|g| u16::try_from(g).ok())),
        };
        match result {
            Ok(n) => set_at(svc, &["spec", "healthCheckNodePort"], json!(n)),
            Err(e) => causes.push(Cause::invalid("spec.healthCheckNodePort", "", &e)),
        }
    } else if let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("healthCheckNodePort");
    }
    default_at(svc, &["status", "loadBalancer"], json!({}));
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_allocation() {
        let alloc = Allocators::default();
        let mut a = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}});
        service(&mut a, None, &alloc).unwrap();
        let ip = str_at(&a, &["spec", "clusterIP"]).unwrap().to_owned();
        assert!(ip.starts_with("10.9"), "{ip}");
        let port = &a["spec"]["ports"][0];
        assert_eq!(port["protocol"], "TCP");
        assert_eq!(port["targetPort"], 80);
        let node_port = port["nodePort"].as_u64().unwrap();
        assert!((30000..=32767).contains(&node_port));
        assert!(a["spec"]["healthCheckNodePort"].as_u64().is_some());

        // Explicit duplicate node port is rejected.
        let mut b =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 81, "nodePort": node_port}]}});
        let causes = service(&mut b, None, &alloc).unwrap_err();
        assert_eq!(causes[0].field, "spec.ports[0].nodePort");

        // Update keeps allocations; changing the cluster IP is refused.
        let mut updated = json!({"spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 80}]}});
        service(&mut updated, Some(&a), &alloc).unwrap();
        assert_eq!(updated["spec"]["clusterIP"], a["spec"]["clusterIP"]);
        assert_eq!(updated["spec"]["ports"][0]["nodePort"], json!(node_port));
        let mut moved = json!({"spec": {"clusterIP": "10.96.9.9", "ports": [{"port": 80}]}});
        assert!(service(&mut moved, Some(&a), &alloc).is_err());

        // To ClusterIP drops node ports.
        let mut plain =
            json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": node_port}]}});
        service(&mut plain, Some(&a), &alloc).unwrap();
        assert!(plain["spec"]["ports"][0].get("nodePort").is_none());
        assert!(plain["spec"].get("healthCheckNodePort").is_none());

        alloc.release_service(&a);
        let mut c =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 81, "nodePort": node_port}]}});
        service(&mut c, None, &alloc).unwrap();
    }

    #[test]
    fn pod_defaults() {
        let mut p = json!({"spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}});
        pod(&mut p);
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(p["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(p["spec"]["dnsPolicy"], "ClusterFirst");
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["status"]["qosClass"], "BestEffort");
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(
            p["spec"]["containers"][1]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(p["spec"]["containers"][1]["ports"][0]["protocol"], "TCP");
        assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 2);
    }
}
