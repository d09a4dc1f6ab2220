//! `valueFrom.resourceFieldRef`: a container's limits and requests, divided
//! by a divisor and rounded up, as the kubelet computes them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceFieldSelector, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::ParsedQuantity;

/// Why a resource reference cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ResourceError {
    #[error("unsupported container resource : {0}")]
    Unsupported(String),
    #[error("invalid quantity {value:?} for {resource}")]
    Quantity { resource: String, value: String },
    #[error("divisor {0:?} is zero for the unit it divides")]
    ZeroDivisor(String),
}

enum Unit {
    Cpu,
    Bytes,
}

/// Resolve `selector` against `resources`; limits that are not set default
/// to `allocatable` (the node's), as the kubelet does.
pub(crate) fn resolve_resource(
    selector: &ResourceFieldSelector,
    resources: Option<&ResourceRequirements>,
    allocatable: Option<&BTreeMap<String, Quantity>>,
) -> Result<String, ResourceError> {
    let resource = selector.resource.as_str();
    let (is_limit, name) = if let Some(name) = resource.strip_prefix("limits.") {
        (true, name)
    } else if let Some(name) = resource.strip_prefix("requests.") {
        (false, name)
    } else {
        return Err(ResourceError::Unsupported(resource.to_owned()));
    };
    let unit = match name {
        "cpu" => Unit::Cpu,
        "memory" | "ephemeral-storage" => Unit::Bytes,
        n if n.starts_with("hugepages-") => Unit::Bytes,
        _ => return Err(ResourceError::Unsupported(resource.to_owned())),
    };
    let set = resources.and_then(|r| {
        if is_limit {
            r.limits.as_ref()
        } else {
            r.requests.as_ref()
        }
    });
    let mut quantity = set.and_then(|m| m.get(name));
    let defaults_to_allocatable =
        is_limit && matches!(name, "cpu" | "memory" | "ephemeral-storage");
    if quantity.is_none() && defaults_to_allocatable {
        quantity = allocatable.and_then(|a| a.get(name));
    }
    let parse = |q: &Quantity| {
        ParsedQuantity::parse(&q.0).map_err(|_| ResourceError::Quantity {
            resource: resource.to_owned(),
            value: q.0.clone(),
        })
    };
    let value = match quantity {
        Some(q) => parse(q)?,
        None => ParsedQuantity::parse("0")
            .map_err(|_| ResourceError::Unsupported(resource.to_owned()))?,
    };
    let divisor = match selector.divisor.as_ref() {
        Some(d) => {
            let parsed = parse(d)?;
            if parsed.is_zero() {
                ParsedQuantity::parse("1").map_err(|_| ResourceError::ZeroDivisor(d.0.clone()))?
            } else {
                parsed
            }
        }
        None => ParsedQuantity::parse("1")
            .map_err(|_| ResourceError::Unsupported(resource.to_owned()))?,
    };
    let (numerator, denominator) = match unit {
        Unit::Cpu => (value.milli_value(), divisor.milli_value()),
        Unit::Bytes => (value.value(), divisor.value()),
    };
    if denominator <= 0 {
        return Err(ResourceError::ZeroDivisor(
            selector
                .divisor
                .as_ref()
                .map(|d| d.0.clone())
                .unwrap_or_default(),
        ));
    }
    Ok(ceil_div(numerator, denominator).to_string())
}

fn ceil_div(n: i64, d: i64) -> i64 {
    let q = n / d;
    if n % d > 0 { q + 1 } else { q }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    fn reqs(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> ResourceRequirements {
        let map = |pairs: &[(&str, &str)]| {
            Some(pairs.iter().map(|(k, v)| ((*k).to_owned(), q(v))).collect())
        };
        ResourceRequirements {
            limits: map(limits),
            requests: map(requests),
            ..Default::default()
        }
    }

    fn sel(resource: &str, divisor: Option<&str>) -> ResourceFieldSelector {
        ResourceFieldSelector {
            resource: resource.into(),
            divisor: divisor.map(q),
            container_name: None,
        }
    }

    #[test]
    fn cpu_and_memory_with_divisors() {
        let r = reqs(
            &[("cpu", "1500m"), ("memory", "1Gi")],
            &[("cpu", "250m"), ("memory", "100M")],
        );
        let get = |res: &str, div: Option<&str>| {
            resolve_resource(&sel(res, div), Some(&r), None).unwrap()
        };
        assert_eq!(get("limits.cpu", None), "2");
        assert_eq!(get("limits.cpu", Some("1m")), "1500");
        assert_eq!(get("requests.cpu", Some("1m")), "250");
        assert_eq!(get("requests.cpu", None), "1");
        assert_eq!(get("limits.memory", None), "1073741824");
        assert_eq!(get("limits.memory", Some("1Mi")), "1024");
        assert_eq!(get("requests.memory", Some("1Mi")), "96");
        assert_eq!(get("requests.memory", Some("1M")), "100");
        assert_eq!(get("limits.cpu", Some("0")), "2");
    }

    #[test]
    fn unset_limits_default_to_allocatable_and_requests_to_zero() {
        let alloc = BTreeMap::from([("cpu".to_owned(), q("4")), ("memory".to_owned(), q("8Gi"))]);
        let r = reqs(&[], &[]);
        assert_eq!(
            resolve_resource(&sel("limits.cpu", None), Some(&r), Some(&alloc)).unwrap(),
            "4"
        );
        assert_eq!(
            resolve_resource(&sel("limits.memory", Some("1Gi")), None, Some(&alloc)).unwrap(),
            "8"
        );
        assert_eq!(
            resolve_resource(&sel("requests.cpu", None), Some(&r), Some(&alloc)).unwrap(),
            "0"
        );
        assert_eq!(
            resolve_resource(&sel("limits.ephemeral-storage", None), None, None).unwrap(),
            "0"
        );
    }

    #[test]
    fn hugepages_and_errors() {
        let r = reqs(&[("hugepages-2Mi", "4Mi")], &[]);
        assert_eq!(
            resolve_resource(&sel("limits.hugepages-2Mi", Some("1Mi")), Some(&r), None).unwrap(),
            "4"
        );
        assert_eq!(
            resolve_resource(&sel("limits.nvidia.com/gpu", None), Some(&r), None)
                .unwrap_err()
                .to_string(),
            "unsupported container resource : limits.nvidia.com/gpu"
        );
        assert!(resolve_resource(&sel("cpu", None), None, None).is_err());
        let bad = reqs(&[("cpu", "lots")], &[]);
        assert!(matches!(
            resolve_resource(&sel("limits.cpu", None), Some(&bad), None),
            Err(ResourceError::Quantity { .. })
        ));
        // A sub-unit divisor rounds up to one unit, as in Go.
        assert_eq!(
            resolve_resource(
                &sel("limits.memory", Some("1m")),
                Some(&reqs(&[("memory", "3")], &[])),
                None
            )
            .unwrap(),
            "3"
        );
        assert!(matches!(
            resolve_resource(&sel("limits.memory", Some("-1")), Some(&r), None),
            Err(ResourceError::ZeroDivisor(_))
        ));
    }
}
