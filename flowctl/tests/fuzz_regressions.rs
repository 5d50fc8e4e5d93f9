//! Inputs `tools/fuzz.sh` found crashing a decoder of this crate, kept as regression tests on
//! their exact bytes (CI runs these; it does not fuzz). Each must now be rejected with an
//! error, never a panic.

use flowctl::pyrrha::wire::{Frame as PyrrhaFrame, PyrrhaRepr};
use flowctl::wire::Error;

/// `fuzz/artifacts/signal/crash-ccc3e800…` (target `signal`): a 17-byte Xoff signal frame
/// (EtherType 0x88B5, version 1) of Aquarius type 0x10. `Frame::new_checked` holds a type that
/// is not Pyrrha's to the 16-byte common header, and `PyrrhaRepr::parse` read the root
/// fields (bytes 16..20) before looking at the type: index out of bounds.
static SHORT_AQUARIUS_SIGNAL: [u8; 17] = [
    0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, // dst
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // src
    0x88, 0xb5, // Xoff signal
    0x01, // version
    0x10, // Aquarius FLOW PAUSE
    0xff,
];

#[test]
fn short_non_pyrrha_signal_is_unknown_not_a_panic() {
    let f = PyrrhaFrame::new_checked(&SHORT_AQUARIUS_SIGNAL[..]).unwrap();
    assert_eq!(PyrrhaRepr::parse(&f), Err(Error::UnknownOpcode));
}

/// The same bytes with type 0x2F: inside Pyrrha's range (0x20-0x2F), so a Pyrrha switch hands
/// it to `PyrrhaRepr::parse` (`dataplane::scheme::pyrrha`): a 17-byte frame from any
/// neighbour used to panic the switch's worker.
#[test]
fn short_unknown_pyrrha_type_is_unknown_not_a_panic() {
    let mut b = SHORT_AQUARIUS_SIGNAL;
    b[15] = 0x2f;
    for n in 16..=b.len() {
        let f = PyrrhaFrame::new_checked(&b[..n]).unwrap();
        assert_eq!(
            PyrrhaRepr::parse(&f),
            Err(Error::UnknownOpcode),
            "{n} bytes"
        );
    }
}
