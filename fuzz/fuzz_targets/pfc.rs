//! IEEE 802.1Qbb PFC and 802.3x PAUSE (`flowctl::wire::pfc`): every parser on arbitrary
//! bytes, and what parses re-emits to a frame that parses the same.
#![no_main]

use flowctl::wire::pfc::{Frame, MacControlRepr, PauseRepr, PfcRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = Frame::new_checked(data) else {
        return;
    };
    let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.opcode());
    if let Ok(r) = PfcRepr::parse(&f) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Frame::new_unchecked(&mut b[..]));
        assert_eq!(PfcRepr::parse(&Frame::new_checked(&b[..]).unwrap()), Ok(r));
    }
    if let Ok(r) = PauseRepr::parse(&f) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Frame::new_unchecked(&mut b[..]));
        assert_eq!(
            PauseRepr::parse(&Frame::new_checked(&b[..]).unwrap()),
            Ok(r)
        );
    }
    if let Ok(r) = MacControlRepr::parse(&f) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Frame::new_unchecked(&mut b[..]));
        assert_eq!(
            MacControlRepr::parse(&Frame::new_checked(&b[..]).unwrap()),
            Ok(r)
        );
    }
});
