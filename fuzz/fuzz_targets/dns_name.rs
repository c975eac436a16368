//! Any bytes as a DNS message (UDP) and as the start of a DNS-over-TCP stream: a question or
//! none, never a panic or a loop, a name within its bound; and a name found in the whole is
//! never another name in a part (every prefix gives more-needed, or the same question).
#![no_main]

use corecap_wire::name::{dns, Parse, NAME_MAX};
use libfuzzer_sys::fuzz_target;

fn prefixes_agree<T: PartialEq + std::fmt::Debug>(data: &[u8], parse: impl Fn(&[u8]) -> Parse<T>) {
    let Parse::Found(whole) = parse(data) else {
        return;
    };
    for i in 0..16 {
        let cut = data.len() * i / 16;
        match parse(&data[..cut]) {
            Parse::More => {}
            Parse::Found(part) => assert_eq!(part, whole, "prefix {cut}"),
            Parse::Invalid => panic!("prefix {cut} of a question is invalid"),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Parse::Found(q) = dns::question(data) {
        assert!(q.name.len() <= NAME_MAX);
        let _ = q.name.escaped().to_string();
    }
    let _ = dns::question_tcp(data);
    prefixes_agree(data, dns::question);
    prefixes_agree(data, dns::question_tcp);
});
