//! Any bytes as a client's first HTTP bytes: a request's method, Host and path, or none,
//! never a panic, each within its bound; a request found in the whole is never another in a
//! part (every prefix gives more-needed, or the same request).
#![no_main]

use corecap_wire::name::http::{self, METHOD_MAX};
use corecap_wire::name::{Parse, NAME_MAX};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = http::request(data);
    if let Parse::Found(r) = whole {
        assert!(r.method.len() <= METHOD_MAX && r.host.len() <= NAME_MAX);
        assert!(r.path.len() <= NAME_MAX);
        let _ = (r.host.escaped().to_string(), r.path.escaped().to_string());
        for i in 0..16 {
            let cut = data.len() * i / 16;
            match http::request(&data[..cut]) {
                Parse::More => {}
                Parse::Found(part) => assert_eq!(part, r, "prefix {cut}"),
                Parse::Invalid => panic!("prefix {cut} of a request is invalid"),
            }
        }
    }
});
