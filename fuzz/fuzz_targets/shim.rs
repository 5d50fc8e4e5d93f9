//! The Xoff data shims (EtherType 0x88B6): version 1 (BFC's upstreamQ), version 2
//! (Proteus: path ids, tolerable delay, send time) and version 3 (CONGA: LBTag, CE,
//! feedback). Parse, pop and push on arbitrary bytes with an arbitrary claimed length (a frame's length comes from the ring descriptor, not
//! from the buffer): pop then push restores the frame, and neither ever writes outside the
//! buffer.
#![no_main]

use arbitrary::Arbitrary;
use flowctl::wire::{conga, proteus, shim};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Length the ring descriptor claims (may exceed the buffer).
    len: u16,
    /// Spare room behind the frame for a push.
    room: u8,
    bytes: Vec<u8>,
}

fuzz_target!(|inp: Input| {
    let data = &inp.bytes[..];
    let len = usize::from(inp.len);
    // Version 1.
    if let Ok(f) = shim::Frame::new_checked(data) {
        let _ = (
            f.ethertype(),
            f.version(),
            f.flags(),
            f.upstream_q(),
            f.inner_ethertype(),
        );
        let _ = shim::ShimRepr::parse(&f);
    }
    let mut buf = data.to_vec();
    buf.resize(data.len() + usize::from(inp.room), 0);
    if let Ok((r, n)) = shim::ShimRepr::pop(&mut buf, len) {
        assert_eq!(n + shim::SHIM_LEN, len.min(buf.len()));
        let mut back = buf.clone();
        assert_eq!(r.push(&mut back, n), Some(len.min(buf.len())));
        let m = len.min(data.len());
        assert_eq!(&back[..m], &data[..m]);
    }
    let mut buf = data.to_vec();
    buf.resize(data.len() + usize::from(inp.room), 0);
    let q = data.first().copied().unwrap_or(0) & 0x7f;
    if let Some(n) = (shim::ShimRepr { upstream_q: q }).push(&mut buf, len) {
        let (r, m) = shim::ShimRepr::pop(&mut buf, n).expect("a pushed shim pops");
        assert_eq!((r.upstream_q, m), (q, len));
    }
    // Version 2 (Proteus).
    if let Ok(f) = proteus::Frame::new_checked(data) {
        let _ = (f.paths(), f.t_td_ns(), f.sent_ns(), f.inner_ethertype());
        let _ = proteus::ShimRepr::parse(&f);
    }
    let mut buf = data.to_vec();
    buf.resize(data.len() + usize::from(inp.room), 0);
    if let Ok((r, n)) = proteus::ShimRepr::pop(&mut buf, len) {
        assert_eq!(n + proteus::SHIM_LEN, len.min(buf.len()));
        let mut back = buf.clone();
        assert_eq!(r.push(&mut back, n), Some(len.min(buf.len())));
        let m = len.min(data.len());
        // Bits the version-2 parser ignores (flags, reserved byte) are rewritten as zero.
        assert_eq!(&back[..m.min(14)], &data[..m.min(14)]);
        if m > 16 {
            assert_eq!(&back[16..m], &data[16..m]);
        }
    }
    // Version 3 (CONGA).
    if let Ok(f) = conga::Frame::new_checked(data) {
        let _ = (f.lbtag(), f.ce(), f.fb_lbtag(), f.fb_metric(), f.src_leaf());
        let _ = conga::ShimRepr::parse(&f);
    }
    let mut buf = data.to_vec();
    buf.resize(data.len() + usize::from(inp.room), 0);
    if let Ok((r, n)) = conga::ShimRepr::pop(&mut buf, len) {
        assert_eq!(n + conga::SHIM_LEN, len.min(buf.len()));
        let mut back = buf.clone();
        assert_eq!(r.push(&mut back, n), Some(len.min(buf.len())));
        // A pushed shim parses back to what was popped (reserved bits are rewritten as 0).
        assert_eq!(conga::ShimRepr::pop(&mut back, n + conga::SHIM_LEN).map(|x| x.0), Ok(r));
    }
});
