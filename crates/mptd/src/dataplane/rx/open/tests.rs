use super::*;
use crate::dataplane::crypto_pool::CryptoPool;
use std::time::Duration;

/// The crypto stage opens a batch in parallel, yet what is accepted is
/// what the serial worker would accept: every datagram that
/// authenticates, once, in batch order; a forged one in the middle
/// shifts nothing; a datagram twice in one batch is taken once; one
/// the window had seen before the batch is not even tried.
#[test]
fn the_crypto_stage_opens_in_order_and_the_window_takes_each_once() {
    let (seal, open) = crate::plane::testing::session_keys();
    let pool = Arc::new(CryptoPool::start(2, 4, Duration::from_micros(20)).unwrap());
    let mut sub = pool.submitter();
    let mut window = ReplayWindow::new();
    window.update(3).unwrap();
    // seq 0..200, with 50 twice (the copy right after it), 3 already
    // accepted, and 120 forged (a flipped ciphertext byte).
    let mut seqs: Vec<u64> = (0..200).collect();
    seqs.insert(51, 50);
    let mut bufs: Vec<Vec<u8>> = seqs
        .iter()
        .map(|&seq| {
            let payload = 100 + (seq as usize % 7) * 100;
            let mut b = vec![0u8; HEADER_LEN + payload + TAG_LEN];
            let h = Header {
                msg_type: MsgType::Data,
                flags: Flags::SEALED,
                path_id: 0,
                conn_id: 7,
                seq,
                path_seq: seq as u32,
                timestamp_us: 0,
            };
            h.emit(&mut b[..HEADER_LEN]).unwrap();
            b[HEADER_LEN..HEADER_LEN + payload].fill(seq as u8);
            seal.seal_datagram(&mut b, payload).unwrap();
            if seq == 120 {
                b[HEADER_LEN + 5] ^= 1;
            }
            b
        })
        .collect();
    let mut items: Vec<OpenItem> = bufs
        .iter_mut()
        .zip(&seqs)
        .map(|(b, &seq)| OpenItem {
            ptr: b.as_mut_ptr(),
            len: b.len(),
            candidates: u8::from(window.check(seq).is_ok()),
            replayed: window.check(seq).is_err(),
            opened: NOT_OPENED,
        })
        .collect();
    let keys: [Option<&SessionKeys>; 3] = [Some(&open), None, None];
    sub.run(
        &mut items,
        &|chunk: &mut [OpenItem], scratch: &mut Vec<u8>| open_items(chunk, &keys, scratch),
    );
    // What `take_opened` does, in batch order.
    let mut accepted = Vec::new();
    for ((it, &seq), b) in items.iter().zip(&seqs).zip(&bufs) {
        if it.opened == 0 && window.update(seq).is_ok() {
            let payload = &b[HEADER_LEN..b.len() - TAG_LEN];
            assert!(
                payload.iter().all(|&x| x == seq as u8),
                "seq {seq} opened wrong"
            );
            accepted.push(seq);
        }
    }
    let expected: Vec<u64> = (0..200).filter(|&s| s != 3 && s != 120).collect();
    assert_eq!(accepted, expected);
    assert_eq!(
        items[3].candidates, 0,
        "an already accepted number is not tried"
    );
    assert_eq!(items[121].opened, NOT_OPENED, "the forged datagram");
    assert_eq!(items[51].opened, 0, "the copy opens; the window refuses it");
}
