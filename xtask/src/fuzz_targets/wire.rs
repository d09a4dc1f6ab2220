//! The targets of what arrives on the wire or in a name: SPDY and WebSocket frames, the kubelet API's queries, provider IDs and CIDRs.

use super::*;

pub(super) fn spdy_frame(data: &[u8]) -> String {
    use stratus_kubelet::api::spdy::Frame;
    let parsed = Frame::parse(data);
    if let Ok(Some((frame, used))) = &parsed {
        assert!(
            *used <= data.len(),
            "parse used {used} of {} bytes",
            data.len()
        );
        let encoded = frame.encode();
        if let Ok(Some((again, _))) = Frame::parse(&encoded) {
            assert_eq!(&again, frame, "a frame changed through encode and parse");
        }
    }
    outcome(&parsed, |f| match f {
        None => "more".into(),
        Some((frame, _)) => class(
            format!("{frame:?}")
                .split(['(', ' ', '{'])
                .next()
                .unwrap_or(""),
        ),
    })
}

pub(super) fn spdy_frame_seeds() -> Vec<Vec<u8>> {
    use stratus_kubelet::api::spdy::Frame;
    vec![
        Frame::Ping(7).encode(),
        Frame::Data {
            stream: 1,
            fin: true,
            data: b"hello".to_vec(),
        }
        .encode(),
        vec![0x80, 3, 0, 1, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0],
        vec![0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 5],
        vec![0x80, 3, 0, 7, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0],
    ]
}

pub(super) fn spdy_headers(data: &[u8]) -> String {
    use stratus_kubelet::api::spdy::{Decompressor, decode_block, encode_block};
    let plain = decode_block(data);
    if let Ok(headers) = &plain {
        // Names are written lowercase, as SPDY requires.
        let lower: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
            .collect();
        let again = decode_block(&encode_block(headers));
        assert_eq!(
            again.ok(),
            Some(lower),
            "a header block changed through encode"
        );
    }
    let compressed = Decompressor::default().decompress(data);
    format!(
        "{} / {}",
        outcome(&plain, |h| h.len().min(4).to_string()),
        outcome(&compressed, |h| h.len().min(4).to_string())
    )
}

pub(super) fn spdy_headers_seeds() -> Vec<Vec<u8>> {
    use stratus_kubelet::api::spdy::{Compressor, encode_block};
    let headers = vec![
        ("streamtype".to_owned(), "stdout".to_owned()),
        ("port".to_owned(), "8080".to_owned()),
    ];
    vec![
        encode_block(&headers),
        Compressor::default().compress(&headers),
    ]
}

pub(super) fn websocket_frame(data: &[u8]) -> String {
    use stratus_kubelet::api::{ChannelProtocol, Frame};
    let Some((&selector, message)) = data.split_first() else {
        return "empty".into();
    };
    let protocol = [
        ChannelProtocol::V1,
        ChannelProtocol::V1Base64,
        ChannelProtocol::V4,
        ChannelProtocol::V4Base64,
        ChannelProtocol::V5,
    ][usize::from(selector) % 5];
    let is_text = protocol.is_base64();
    let frame = protocol.decode(is_text, message);
    if let Ok(Frame::Data(channel, bytes)) = &frame {
        let (text, encoded) = protocol.encode(*channel, bytes);
        assert_eq!(
            protocol.decode(text, &encoded).ok(),
            Some(Frame::Data(*channel, bytes.clone())),
            "a {} frame changed through encode",
            protocol.name()
        );
    }
    format!(
        "{} {}",
        protocol.name(),
        outcome(&frame, |f| class(
            format!("{f:?}").split('(').next().unwrap_or("")
        ))
    )
}

pub(super) fn websocket_frame_seeds() -> Vec<Vec<u8>> {
    vec![
        b"\x00\x01hello".to_vec(),
        b"\x011aGVsbG8=".to_vec(),
        b"\x04\xff\x00".to_vec(),
        b"\x03\x00".to_vec(),
    ]
}

pub(super) fn kubelet_query(data: &[u8]) -> String {
    use stratus_kubelet::api::{Query, forward_ports, log_options, stream_options};
    let raw = text(data);
    let query = Query::parse(Some(&raw));
    let ports = forward_ports(&query);
    if let Ok(ports) = &ports {
        assert!(
            ports.len() <= stratus_kubelet::api::MAX_PORTS,
            "{} ports",
            ports.len()
        );
    }
    format!(
        "log {} / exec {} / attach {} / ports {}",
        outcome(&log_options(&query), |_| String::new()),
        outcome(&stream_options(&query, true), |_| String::new()),
        outcome(&stream_options(&query, false), |_| String::new()),
        outcome(&ports, |p| p.len().min(3).to_string())
    )
}

pub(super) fn kubelet_query_seeds() -> Vec<Vec<u8>> {
    seeds_of(&[
        "follow=true&tailLines=10&sinceSeconds=5&timestamps=1&limitBytes=100&previous=false",
        "command=sh&command=-c&command=echo%20hi&stdin=true&stdout=1&tty=true&container=app",
        "port=8080&port=9090",
        "sinceTime=2024-01-01T00:00:00Z",
    ])
}

pub(super) fn provider_id(data: &[u8]) -> String {
    use stratus_cloud::ProviderId;
    let raw = text(data);
    let (provider, id) = raw.split_once('\0').unwrap_or(("fake", raw.as_str()));
    let parsed = ProviderId::parse_for(provider, id);
    if let Ok(p) = &parsed {
        let again = ProviderId::parse_for(provider, &p.to_string());
        assert_eq!(
            again.as_ref().ok(),
            Some(p),
            "{id:?} changed through to_string"
        );
    }
    outcome(&parsed, |p| class(p.id().len().min(3)))
}

pub(super) fn provider_id_seeds() -> Vec<Vec<u8>> {
    seeds_of(&[
        "fake://node-0",
        "aws\0aws:///us-east-1a/i-0123",
        "gce\0gce://p/z/n",
        "://",
        "fake:///",
    ])
}

pub(super) fn cidr(data: &[u8]) -> String {
    use stratus_ccm::ipam::CidrSet;
    use stratus_cloud::helpers::{Cidr, parse_ip_sloppy, parse_node_ip_annotation};
    let Some((&mask, rest)) = data.split_first() else {
        return "empty".into();
    };
    let raw = text(rest);
    let parsed = raw.parse::<Cidr>();
    if let Ok(c) = &parsed {
        assert!(
            c.contains(c.first()) && c.contains(c.last()),
            "{raw}: its ends are outside it"
        );
        assert!(c.overlaps(c), "{raw} does not overlap itself");
        if let Ok(mut set) = CidrSet::new(*c, mask % 130) {
            let first = set.allocate_next();
            if let Some(f) = &first {
                assert!(c.contains(f.first()), "{f} allocated outside {c}");
                assert!(set.contains(f));
                let _ = set.release(f);
            }
        }
    }
    let list = stratus_ccm::app::parse_cidr_list("--cluster-cidr", &raw);
    format!(
        "{} / ip {} / node-ip {} / list {}",
        outcome(&parsed, |c| c.prefix_len().min(3).to_string()),
        parse_ip_sloppy(&raw).is_some(),
        outcome(&parse_node_ip_annotation(&raw), |v| v
            .len()
            .min(3)
            .to_string()),
        outcome(&list, |v| v.len().min(3).to_string())
    )
}

pub(super) fn cidr_seeds() -> Vec<Vec<u8>> {
    seeds_of(&[
        "\x1810.244.0.0/16",
        "\x40fd00::/48",
        "\x10010.0.0.1/8",
        "\x18192.168.0.0/24,fd00::/64",
        "\x20::ffff:1.2.3.4/96",
    ])
}
