//! Ranged reads (`Store::get_ranges`, `Store::batch_get_ranges`) against the harness's
//! cluster: fragments into pool and plain memory, a miss, fragments past the value or the
//! buffer, a bad key, the batch form, one writer thread with reader threads.
#![deny(warnings)]

mod common;

use common::{connect, pattern, prefix};
use mooncake_store::{Error, Range};

const MIB: u64 = 1 << 20;

#[test]
fn fragments_into_pool_and_plain_memory() {
    let s = connect(16 * MIB);
    let key = prefix("ranges") + "a";
    let v = pattern(1 << 20, 3);
    s.put(&key, &v).unwrap();
    let frags = [
        Range::new(0, 4096, 0),
        Range::new(777, 1000, 8192),
        Range::new((1 << 20) - 4096, 4096, 20000),
        Range::new(5, 0, 3),
    ];
    let mut plain = vec![0u8; 64 << 10];
    let mut pool = s.alloc(64 << 10).unwrap();
    for buf in [&mut plain[..], &mut pool[..]] {
        buf.fill(0);
        let got = s.get_ranges(&key, buf, &frags).unwrap();
        assert_eq!(got, vec![Ok(4096), Ok(1000), Ok(4096), Ok(0)]);
        for f in &frags[..3] {
            let (src, dst, n) = (f.src_offset as usize, f.dst_offset as usize, f.length as usize);
            assert_eq!(&buf[dst..dst + n], &v[src..src + n]);
        }
        assert_eq!(buf[4096], 0, "nothing between the fragments is written");
    }
}

#[test]
fn misses_bad_fragments_and_bad_keys() {
    let s = connect(16 * MIB);
    let key = prefix("ranges") + "bad";
    let v = pattern(4096, 4);
    s.put(&key, &v).unwrap();
    let mut buf = vec![0u8; 4096];
    let missing = prefix("ranges") + "never";
    assert_eq!(
        s.get_ranges(&missing, &mut buf, &[Range::new(0, 1, 0)]).unwrap(),
        vec![Err(Error::ObjectNotFound)]
    );
    let got = s
        .get_ranges(
            &key,
            &mut buf,
            &[Range::new(4090, 10, 0), Range::new(0, 10, 4090), Range::new(u64::MAX, 2, 0),
              Range::new(10, 10, 0)],
        )
        .unwrap();
    assert_eq!(got, vec![Err(Error::InvalidParams), Err(Error::InvalidParams),
                         Err(Error::InvalidParams), Ok(10)]);
    assert_eq!(&buf[..10], &v[10..20]);
    assert_eq!(s.get_ranges("", &mut buf, &[Range::new(0, 1, 0)]), Err(Error::InvalidParams));
    assert_eq!(s.get_ranges(&key, &mut buf, &[]).unwrap(), vec![]);
}

#[test]
fn batch_of_several_keys() {
    let s = connect(16 * MIB);
    let (ka, kb) = (prefix("ranges") + "ba", prefix("ranges") + "bb");
    let (va, vb) = (pattern(100_000, 5), pattern(50_000, 6));
    s.put(&ka, &va).unwrap();
    s.put(&kb, &vb).unwrap();
    let mut buffers = vec![vec![0u8; 8192], vec![0u8; 1000], vec![0u8; 8], vec![0u8; 8]];
    let r0 = [Range::new(0, 4096, 0), Range::new(99_000, 1000, 5000)];
    let r1 = [Range::new(49_000, 1000, 0)];
    let r2 = [Range::new(99_992, 8, 0)];
    let r3 = [Range::new(0, 1, 0)];
    let keys = [ka.as_str(), kb.as_str(), ka.as_str(), "bad\0key"];
    let got = s.batch_get_ranges(&keys, &mut buffers, &[&r0, &r1, &r2, &r3]).unwrap();
    assert_eq!(got[0], vec![Ok(4096), Ok(1000)]);
    assert_eq!(got[1], vec![Ok(1000)]);
    assert_eq!(got[2], vec![Ok(8)]);
    assert_eq!(got[3], vec![Err(Error::InvalidParams)]);
    assert_eq!(&buffers[0][..4096], &va[..4096]);
    assert_eq!(&buffers[0][5000..6000], &va[99_000..100_000]);
    assert_eq!(&buffers[1][..], &vb[49_000..50_000]);
    assert_eq!(&buffers[2][..], &va[99_992..]);
    let mut two = vec![vec![0u8; 1]];
    assert_eq!(s.batch_get_ranges(&keys[..2], &mut two, &[&r0, &r1]), Err(Error::InvalidParams));
}

#[test]
fn one_writer_many_readers() {
    let s = connect(32 * MIB);
    let base = prefix("ranges") + "w";
    const KEYS: usize = 16;
    const SIZE: usize = 32 << 10;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 0..KEYS {
                s.put(format!("{base}{i}"), &pattern(SIZE, i as u8)).unwrap();
            }
        });
        for r in 0..3usize {
            let (s, base) = (&s, &base);
            scope.spawn(move || {
                let mut buf = vec![0u8; 2048];
                let mut done = [false; KEYS];
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(50);
                while done.iter().any(|d| !d) && std::time::Instant::now() < deadline {
                    for i in 0..KEYS {
                        if done[i] {
                            continue;
                        }
                        let src = ((r * 131 + i) % (SIZE - 1024)) as u64;
                        let frags = [Range::new(src, 1024, 0),
                                     Range::new((SIZE - 1024) as u64, 1024, 1024)];
                        let got = s.get_ranges(format!("{base}{i}"), &mut buf, &frags).unwrap();
                        if got[0] == Err(Error::ObjectNotFound)
                            || got[0] == Err(Error::ReplicaIsNotReady)
                        {
                            continue;
                        }
                        let v = pattern(SIZE, i as u8);
                        assert_eq!(got, vec![Ok(1024), Ok(1024)]);
                        assert_eq!(&buf[..1024], &v[src as usize..src as usize + 1024]);
                        assert_eq!(&buf[1024..], &v[SIZE - 1024..]);
                        done[i] = true;
                    }
                }
                assert!(done.iter().all(|d| *d), "reader {r} did not see every key");
            });
        }
    });
}
