//! The full decision path of the criterion `pipeline`/`bfc` benches (`Switch::receive` → MMU
//! admit → enqueue → scheduler → shaper → delay line → release) for a fixed number of 64-byte
//! routed frames, without criterion's adaptive iteration counts, so that an instruction
//! counter (`bench/callgrind.sh`) gives the same total on every run of the same binary.
//!
//! `decision_path static|bfc PACKETS`

use dataplane::frame::{FrameMem, HeapMem};
use dataplane::switch::Outputs;
use dataplane::wire::{EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, MacAddr};
use dataplane::{Switch, Topology};
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::path::Path;

/// The topology of `benches/pipeline.rs`: ECMP over two ports, 8 queues, a 16 MB MMU.
const TOPO: &str = r#"
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

fn frame(src: MacAddr, dst: MacAddr, sport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    EthernetRepr {
        src,
        dst,
        ethertype: EtherType::IPV4,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    Ipv4Repr {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 1, 0, 3),
        protocol: 17,
        dscp: 0,
        ecn: 1,
        ttl: 64,
        payload_len: 30,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]));
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&5201u16.to_be_bytes());
    f
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(scheme), Some(n)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: decision_path static|bfc PACKETS");
    };
    let n: u64 = n.parse()?;
    let text = match scheme.as_str() {
        "static" => TOPO.to_string(),
        "bfc" => TOPO.replace("name = \"s1\"\n", "name = \"s1\"\nscheme = \"bfc\"\n"),
        s => anyhow::bail!("unknown scheme `{s}`: static or bfc"),
    };
    let topo = Topology::parse(&text, Path::new("decision_path.toml"))?;
    let spec = topo.switch_spec("s1")?;
    let h1 = topo.host_mac(&topo.hosts[0]);
    let frames: Vec<Vec<u8>> = (0..64)
        .map(|i| frame(h1, spec.ports[0].mac, 1000 + i))
        .collect();
    let mut sw = Switch::single(spec, 0)?;
    let mut mem = HeapMem::new(1024, 1792);
    let mut out = Outputs::new();
    let mut now = 0u64;
    let mut sent = 0u64;
    for i in 0..n {
        let f = mem
            .alloc_with(&frames[(i & 63) as usize])
            .ok_or_else(|| anyhow::anyhow!("out of frames"))?;
        sw.receive(&mut mem, 0, f, 64, now, &mut out);
        now += 6_720; // one 64 B frame time at 100 Gbit/s
        for p in [2u16, 3] {
            sw.service(&mut mem, p, now, &mut out);
        }
        for (f, _) in out.tx.drain(..) {
            sent += 1;
            mem.free(black_box(f));
        }
    }
    println!("{scheme}: {n} frames in, {sent} out");
    Ok(())
}
