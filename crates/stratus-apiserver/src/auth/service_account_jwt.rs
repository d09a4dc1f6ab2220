//! ServiceAccount tokens as kube-apiserver issues them: JWTs signed with
//! the server's service-account key (ES256 here), whose claims name the
//! issuer, audiences, expiry and the `kubernetes.io` ServiceAccount (and
//! bound object), and whose public key is published for issuer discovery
//! (`/.well-known/openid-configuration`, `/openid/v1/jwks`).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use rustls::SignatureScheme;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::SigningKey;
use serde_json::{Value, json};

/// The issuer kube-apiserver names by default in a kubeadm cluster.
pub(crate) const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The server's service-account signing key.
pub(crate) struct Signer {
    key: Arc<dyn SigningKey>,
    /// The key id (`kid`): a digest of the public key.
    kid: String,
    /// The public key, as a JWK.
    jwk: Value,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("kid", &self.kid).finish()
    }
}

/// The 32-byte big-endian form of a DER INTEGER's content.
fn fixed32(int: &[u8]) -> Option<[u8; 32]> {
    let trimmed: &[u8] = match int {
        [0, rest @ ..] if rest.len() == 32 => rest,
        other => other,
    };
    if trimmed.len() > 32 {
        return None;
    }
    let mut out = [0u8; 32];
    out[32 - trimmed.len()..].copy_from_slice(trimmed);
    Some(out)
}

/// An ASN.1 DER ECDSA signature (SEQUENCE of r and s) as JWS's `r || s`.
fn der_to_jws(der: &[u8]) -> Option<Vec<u8>> {
    let body = match der {
        [0x30, len, rest @ ..] if usize::from(*len) == rest.len() => rest,
        _ => return None,
    };
    let (r, rest) = match body {
        [0x02, len, rest @ ..] => rest.split_at_checked(usize::from(*len))?,
        _ => return None,
    };
    let s = match rest {
        [0x02, len, rest @ ..] if usize::from(*len) == rest.len() => rest,
        _ => return None,
    };
    let mut out = fixed32(r)?.to_vec();
    out.extend_from_slice(&fixed32(s)?);
    Some(out)
}

impl Signer {
    /// A new P-256 key.
    pub(crate) fn new() -> Result<Self, String> {
        let pair = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pair.serialize_der()));
        let key = rustls::crypto::ring::sign::any_ecdsa_type(&der).map_err(|e| e.to_string())?;
        let raw = pair.public_key_raw();
        let (x, y) = match raw {
            [0x04, rest @ ..] if rest.len() == 64 => rest.split_at(32),
            _ => return Err("unexpected public key encoding".into()),
        };
        let kid = B64.encode(&raw[1..13]);
        let jwk = json!({"use": "sig", "kty": "EC", "kid": kid, "crv": "P-256", "alg": "ES256",
            "x": B64.encode(x), "y": B64.encode(y)});
        Ok(Self { key, kid, jwk })
    }

    /// A signed token with `claims`.
    pub(crate) fn sign(&self, claims: &Value) -> Result<String, String> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let signer = self
            .key
            .choose_scheme(&[SignatureScheme::ECDSA_NISTP256_SHA256])
            .ok_or("the key cannot sign ES256")?;
        let der = signer.sign(input.as_bytes()).map_err(|e| e.to_string())?;
        let signature = der_to_jws(&der).ok_or("unexpected signature encoding")?;
        Ok(format!("{input}.{}", B64.encode(signature)))
    }

    /// `/openid/v1/jwks`.
    pub(crate) fn jwks(&self) -> Value {
        json!({"keys": [self.jwk]})
    }
}

/// `/.well-known/openid-configuration`.
pub(crate) fn openid_configuration() -> Value {
    json!({
        "issuer": ISSUER,
        "jwks_uri": format!("{ISSUER}/openid/v1/jwks"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    })
}

/// The claims of a token for a ServiceAccount (and the object it is bound
/// to, if any), valid from `now` for `seconds`.
pub(crate) fn claims(
    namespace: &str,
    name: &str,
    uid: &str,
    audiences: &Value,
    bound: Option<&Value>,
    now: i64,
    seconds: i64,
) -> Value {
    let mut kubernetes = json!({
        "namespace": namespace,
        "serviceaccount": {"name": name, "uid": uid},
    });
    if let Some(b) = bound
        && let Some(kind) = b.get("kind").and_then(Value::as_str)
    {
        kubernetes[kind.to_lowercase()] = json!({"name": b.get("name"), "uid": b.get("uid")});
    }
    json!({
        "aud": audiences,
        "exp": now + seconds,
        "iat": now,
        "iss": ISSUER,
        "jti": uuid::Uuid::new_v4().to_string(),
        "kubernetes.io": kubernetes,
        "nbf": now,
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_three_part_jwts_with_the_claims() {
        let signer = Signer::new().unwrap();
        let claims = claims("team", "robot", "u-1", &json!(["api"]), None, 1_000, 600);
        let token = signer.sign(&claims).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: Value = serde_json::from_slice(&B64.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "ES256");
        let payload: Value = serde_json::from_slice(&B64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(payload["sub"], "system:serviceaccount:team:robot");
        assert_eq!(payload["exp"], 1_600);
        assert_eq!(payload["kubernetes.io"]["serviceaccount"]["uid"], "u-1");
        assert_eq!(B64.decode(parts[2]).unwrap().len(), 64);
        assert_eq!(signer.jwks()["keys"][0]["kid"], header["kid"]);
    }

    #[test]
    fn der_signatures_become_fixed_width() {
        // r with a leading zero (33 bytes), s short (31 bytes).
        let mut der = vec![0x30, 68, 0x02, 33, 0x00];
        der.extend([0x80; 32]);
        der.extend([0x02, 31]);
        der.extend([0x01; 31]);
        let jws = der_to_jws(&der).unwrap();
        assert_eq!(jws.len(), 64);
        assert_eq!(jws[0], 0x80);
        assert_eq!(jws[32], 0);
        assert!(der_to_jws(&[0x30, 1, 2]).is_none());
    }
}
