//! What the decision-path benchmarks share: the 4-port ECMP switch of `benches/pipeline.rs`,
//! routed 64-byte test frames, and one step of the full path (receive, then service both ECMP
//! ports one frame time later), used by the criterion benches and by `decision_path`, the
//! fixed-count loop that `bench/callgrind.sh` counts instructions of.

use dataplane::frame::{FrameMem, HeapMem};
use dataplane::switch::Outputs;
use dataplane::wire::{EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, MacAddr};
use dataplane::Switch;
use std::net::Ipv4Addr;

/// One switch, ECMP over p3/p4 toward 10.1.0.0/16, 8 queues per port, a 16 MB MMU.
pub const TOPO: &str = r#"
[[switch]]
name = "s1"
defaults = { rate = "100Gbit", delay = "1us", queues = 8 }
port = [{ name = "p1" }, { name = "p2" }, { name = "p3" }, { name = "p4" }]
route = [{ prefix = "10.1.0.0/16", via = ["p3", "p4"] }, { prefix = "10.0.0.2/32", via = ["p2"] }]
buffer = { buffer_bytes = 16000000 }
[[host]]
name = "h1"
ip = "10.0.0.1/24"
[[host]]
name = "h2"
ip = "10.0.0.2/24"
[[host]]
name = "h3"
ip = "10.1.0.3/24"
[[host]]
name = "h4"
ip = "10.1.0.4/24"
[[link]]
a = "h1"
b = "s1:p1"
[[link]]
a = "h2"
b = "s1:p2"
[[link]]
a = "h3"
b = "s1:p3"
[[link]]
a = "h4"
b = "s1:p4"
"#;

/// Switch `s1` of topology `text` (named `file` in errors) and 64 routed 64-byte frames from
/// h1 toward 10.1.0.3, one per source port: the input of the fixed-count decision-path loops.
pub fn spec_and_frames(
    text: &str,
    file: &str,
) -> anyhow::Result<(dataplane::config::SwitchSpec, Vec<Vec<u8>>)> {
    let topo = dataplane::Topology::parse(text, std::path::Path::new(file))?;
    let spec = topo.switch_spec("s1")?;
    let h1 = topo.host_mac(&topo.hosts[0]);
    let dip = Ipv4Addr::new(10, 1, 0, 3);
    let frames = (0..64)
        .map(|i| frame(h1, spec.ports[0].mac, dip, 1000 + i, 64))
        .collect();
    Ok((spec, frames))
}

/// A UDP/IPv4 frame of `len` bytes from 10.0.0.1:`sport` to `dip`:5201, ECN-capable.
pub fn frame(src: MacAddr, dst: MacAddr, dip: Ipv4Addr, sport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    EthernetRepr {
        src,
        dst,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: dip,
        protocol: 17,
        dscp: 0,
        ecn: 1,
        ttl: 64,
        payload_len: len - 34,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]));
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&5201u16.to_be_bytes());
    f
}

/// One 64-byte frame through the full path: received on port 0 at `*now`, then ports 2 and 3
/// serviced one frame time (6.72 ns at 100 Gbit/s) later; what leaves is freed. Returns the
/// frames that left.
pub fn step(
    sw: &mut Switch,
    mem: &mut HeapMem,
    out: &mut Outputs,
    frame: &[u8],
    now: &mut u64,
) -> usize {
    let f = mem.alloc_with(frame).expect("a free frame");
    sw.receive(mem, 0, f, frame.len() as u32, *now, out);
    *now += 6_720;
    for p in [2u16, 3] {
        sw.service(mem, p, *now, out);
    }
    let n = out.tx.len();
    for (f, _) in out.tx.drain(..) {
        mem.free(f);
    }
    n
}
