//! The control-socket request parser (`dataplane::ctl::Request::parse`): any line is a request
//! or an error, and every request prints back (`to_line`) to a line that parses the same.
#![no_main]

use dataplane::ctl::Request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The socket reads UTF-8 lines (`BufRead::lines`); invalid UTF-8 ends the connection
    // before the parser sees it.
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(r) = Request::parse(line) {
        assert_eq!(Request::parse(&r.to_line()), Ok(r));
    }
});
