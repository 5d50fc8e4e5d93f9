//! Ethernet / 802.1Q / IPv4 / IPv6 / L4 parsing: the switch's per-packet parser
//! (`dataplane::parse::parse`), every wire view's checked constructor and `Repr::parse`, the
//! in-place rewrites the pipeline applies to what the parser accepted (TTL, ECN CE) and the
//! data-header readers of the fabric's sinks and the host stack. Bad input must be an `Err`
//! (counted by the caller), never a panic.
#![no_main]

use dataplane::host::wire::{upstream_q, Header, HEADER_LEN};
use dataplane::parse::{decrement_ttl, mark_ce, parse, L3};
use dataplane::wire::data::{magic_payload_at, DataHeader};
use dataplane::wire::{
    EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, UdpPacket,
    UdpRepr, VlanRepr, VlanTag,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(meta) = parse(data) {
        // What the parser accepted, later stages index without checks.
        let off = usize::from(meta.l3_off);
        assert!(off <= data.len());
        if let L3::Ip { .. } = meta.l3 {
            assert!(matches!(meta.ethertype, EtherType::IPV4 | EtherType::IPV6));
        }
        let mut f = data.to_vec();
        decrement_ttl(&mut f, &meta);
        mark_ce(&mut f, &meta);
        if meta.ethertype == EtherType::IPV4 {
            let p = Ipv4Packet::new_checked(&f[off..]).expect("rewrite kept the header valid");
            // The incremental checksum update keeps a valid checksum valid (RFC 1624).
            if Ipv4Packet::new_unchecked(&data[off..]).verify_checksum() {
                assert!(p.verify_checksum());
            }
        }
        // Re-parsing the rewritten frame gives the same flow.
        let again = parse(&f).expect("rewrite kept the frame parseable");
        assert_eq!(again.five_tuple(), meta.five_tuple());
    }
    if let Ok(e) = EthernetFrame::new_checked(data) {
        let r = EthernetRepr::parse(&e).unwrap();
        let mut b = [0u8; 14];
        r.emit(&mut EthernetFrame::new_unchecked(&mut b[..]));
        assert_eq!(&b[..], &data[..14]);
        let _ = e.payload();
    }
    if let Ok(t) = VlanTag::new_checked(data) {
        let r = VlanRepr::parse(&t).unwrap();
        let mut b = [0u8; 4];
        r.emit(&mut VlanTag::new_unchecked(&mut b[..]));
        assert_eq!(VlanRepr::parse(&VlanTag::new_unchecked(&b[..])), Ok(r));
    }
    if let Ok(p) = Ipv4Packet::new_checked(data) {
        let r = Ipv4Repr::parse(&p).unwrap();
        assert!(r.payload_len <= data.len());
        let _ = (p.payload(), p.verify_checksum());
    }
    if let Ok(p) = Ipv6Packet::new_checked(data) {
        let r = Ipv6Repr::parse(&p).unwrap();
        assert_eq!(p.payload().len(), r.payload_len);
    }
    if let Ok(p) = UdpPacket::new_checked(data) {
        let _ = UdpRepr::parse(&p).unwrap();
    }
    let _ = DataHeader::parse(data);
    // The host stack's decoder (`xoff host` receives whatever its NIC queue gets).
    if let Some((h, upq)) = Header::parse_shimmed(data) {
        assert_eq!(upq, upstream_q(data));
        // What it read is what the frame carries: re-emitted, the header's bytes come back.
        let et_off = if upq.is_some() { 16 } else { 12 };
        let p = magic_payload_at(data, et_off, HEADER_LEN).expect("header parsed from here");
        let mut b = [0u8; HEADER_LEN];
        h.emit(&mut b);
        assert_eq!(&b[..], p);
    }
    // Behind the data shim (EtherType at 16) and at arbitrary offsets.
    if let Some((&o, rest)) = data.split_first() {
        let _ = magic_payload_at(rest, usize::from(o), 24);
    }
});
