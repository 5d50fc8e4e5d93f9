//! Xoff signal frames (EtherType 0x88B5), every type code: BFC PAUSE/RESUME/BITMAP
//! (0x01-0x03), Aquarius FLOW PAUSE/RESUME (0x10/0x11), Pyrrha PAUSE/RESUME/MERGE
//! (0x20-0x22) and Proteus FEEDBACK (0x30). Each parser gets the same bytes (and the frame
//! with its type byte forced to each known code, so the fuzzer need not find them); whatever
//! parses re-emits to a frame that parses the same, and the dataplane's dispatch
//! (`scheme::parse_signal`) agrees with the parser.
#![no_main]

use dataplane::scheme::parse_signal;
use flowctl::pyrrha::wire::{Frame as PyrrhaFrame, PyrrhaRepr};
use flowctl::wire::proteus::FeedbackRepr;
use flowctl::wire::signal::{Frame, SignalRepr, ETHERTYPE_XOFF_SIGNAL};
use libfuzzer_sys::fuzz_target;

const TYPES: [u8; 9] = [0x01, 0x02, 0x03, 0x10, 0x11, 0x20, 0x21, 0x22, 0x30];

fn check(data: &[u8]) {
    if let Ok(f) = Frame::new_checked(data) {
        let _ = (f.dst_addr(), f.src_addr(), f.version(), f.signal_type());
        let parsed = SignalRepr::parse(&f);
        if let Ok(r) = parsed {
            let mut b = vec![0u8; r.buffer_len()];
            assert_eq!(r.emit_into(&mut b), b.len());
            assert_eq!(
                SignalRepr::parse(&Frame::new_checked(&b[..]).unwrap()),
                Ok(r)
            );
        }
        assert_eq!(parse_signal(ETHERTYPE_XOFF_SIGNAL, data), parsed.ok());
    }
    if let Ok(f) = PyrrhaFrame::new_checked(data) {
        if let Ok(r) = PyrrhaRepr::parse(&f) {
            let mut b = vec![0u8; r.buffer_len()];
            assert_eq!(r.emit_into(&mut b), b.len());
            assert_eq!(
                PyrrhaRepr::parse(&PyrrhaFrame::new_checked(&b[..]).unwrap()),
                Ok(r)
            );
        }
    }
    let fb = FeedbackRepr::parse(data);
    if let Ok(r) = &fb {
        assert!(FeedbackRepr::is_feedback(data));
        let mut b = vec![0u8; r.buffer_len()];
        assert_eq!(r.emit(&mut b), b.len());
        assert_eq!(FeedbackRepr::parse(&b).as_ref(), Ok(r));
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() > 15 {
        let mut f = data.to_vec();
        f[12..14].copy_from_slice(&ETHERTYPE_XOFF_SIGNAL.to_be_bytes());
        f[14] = 1;
        f[15] = TYPES[usize::from(data[15]) % TYPES.len()];
        check(&f);
    }
});
