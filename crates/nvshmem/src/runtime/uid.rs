//! Handing NVSHMEM's unique id from rank 0 to every other rank: over MPI, or over TCP when
//! there is no launcher (torchrun's `MASTER_ADDR`/`MASTER_PORT` convention).
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream, ToSocketAddrs},
    time::{Duration, Instant},
};

use nvshmem_sys::nvshmemx_uniqueid_t;

use crate::{Error, Result};

/// Size of `nvshmemx_uniqueid_t`, fixed by NVSHMEM's ABI (a static assertion in its headers).
pub(crate) const UID_BYTES: usize = 128;
const _: () = assert!(std::mem::size_of::<nvshmemx_uniqueid_t>() == UID_BYTES);

/// The bytes of a unique id, as they travel between ranks.
pub(crate) type UidBytes = [u8; UID_BYTES];

pub(crate) fn uid_to_bytes(uid: &nvshmemx_uniqueid_t) -> UidBytes {
    let mut out = [0u8; UID_BYTES];
    // SAFETY: nvshmemx_uniqueid_t is a 128-byte plain C struct (an int and a char array, no
    // padding, checked by the assertion above), so reading it as bytes is defined.
    let src = unsafe { std::slice::from_raw_parts(uid as *const _ as *const u8, UID_BYTES) };
    out.copy_from_slice(src);
    out
}

pub(crate) fn uid_from_bytes(bytes: &UidBytes) -> nvshmemx_uniqueid_t {
    let mut uid = nvshmemx_uniqueid_t::default();
    // SAFETY: as above; every bit pattern is a valid value of an int and a char array.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), &mut uid as *mut _ as *mut u8, UID_BYTES)
    };
    uid
}

/// Sent first by each client so that a stray connection, or a rank of another job sharing the
/// port, is told apart from a rank of ours.
const HELLO: &[u8; 8] = b"NVSHRS01";

/// How long ranks wait for each other, unless `NVSHMEM_RS_BOOTSTRAP_TIMEOUT` (seconds) says.
pub(crate) fn rendezvous_timeout() -> Result<Duration> {
    const VAR: &str = "NVSHMEM_RS_BOOTSTRAP_TIMEOUT";
    let set = Error::from_env(VAR, |v| {
        parse_timeout(v).ok_or_else(|| {
            "expected seconds (or with a unit: 500ms, 2m), from 1 ns to 10^9 s".into()
        })
    })?;
    Ok(set.unwrap_or(Duration::from_secs(120)))
}

/// A duration in the runtime's syntax ([`super::TIMEOUT_VAR`]'s: seconds, or with a unit), at
/// least a nanosecond; "never" and 0 have no place in a rendezvous.
pub(crate) fn parse_timeout(v: &str) -> Option<Duration> {
    super::health::parse_timeout(v).ok().flatten()
}

fn tcp_err(detail: impl std::fmt::Display) -> Error {
    Error::Bootstrap {
        bootstrap: "env".into(),
        detail: detail.to_string(),
    }
}

/// Rank 0's side: serve `uid` to the `size - 1` other ranks at `addr:port`.
pub(crate) fn serve_uid(
    addr: &str,
    port: u16,
    size: usize,
    uid: &UidBytes,
    timeout: Duration,
) -> Result<()> {
    let bind_to = (addr, port)
        .to_socket_addrs()
        .map_err(|e| tcp_err(format!("cannot resolve MASTER_ADDR={addr}: {e}")))?
        .next()
        .ok_or_else(|| tcp_err(format!("MASTER_ADDR={addr} resolves to no address")))?;
    // Listen on every interface at that port: MASTER_ADDR may name this host by an address
    // that is not bound locally (a NAT'd or load-balanced name).
    let any = std::net::SocketAddr::new(
        if bind_to.is_ipv4() {
            [0u8; 4].into()
        } else {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        },
        port,
    );
    let listener = TcpListener::bind(any)
        .map_err(|e| tcp_err(format!("rank 0 cannot listen on port {port}: {e}")))?;
    listener.set_nonblocking(true).map_err(tcp_err)?;
    let deadline = Instant::now() + timeout;
    let mut served = vec![false; size];
    served[0] = true;
    let mut remaining = size - 1;
    while remaining > 0 {
        match listener.accept() {
            Ok((mut conn, _)) => {
                conn.set_nonblocking(false).map_err(tcp_err)?;
                conn.set_read_timeout(Some(Duration::from_secs(10)))
                    .map_err(tcp_err)?;
                let mut hello = [0u8; 16];
                if conn.read_exact(&mut hello).is_err() || &hello[..8] != HELLO {
                    continue; // not one of ours
                }
                let rank = u32::from_le_bytes(hello[8..12].try_into().unwrap()) as usize;
                let their_size = u32::from_le_bytes(hello[12..16].try_into().unwrap()) as usize;
                if their_size != size || rank == 0 || rank >= size || served[rank] {
                    return Err(tcp_err(format!(
                        "a peer announced rank {rank} of {their_size}, but this job has {size} ranks{}",
                        if rank < size && served[rank] { " and that rank already arrived" } else { "" }
                    )));
                }
                conn.write_all(uid).map_err(tcp_err)?;
                served[rank] = true;
                remaining -= 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    let missing: Vec<usize> = (0..size).filter(|r| !served[*r]).collect();
                    return Err(tcp_err(format!(
                        "ranks {missing:?} did not connect to port {port} within {timeout:?}"
                    )));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(tcp_err(e)),
        }
    }
    Ok(())
}

/// Any other rank's side: fetch the unique id from rank 0, retrying until it listens.
pub(crate) fn fetch_uid(
    addr: &str,
    port: u16,
    rank: usize,
    size: usize,
    timeout: Duration,
) -> Result<UidBytes> {
    let deadline = Instant::now() + timeout;
    let mut last_err = String::new();
    while Instant::now() < deadline {
        let attempt = (|| -> std::io::Result<UidBytes> {
            let target = (addr, port)
                .to_socket_addrs()?
                .next()
                .ok_or(std::io::ErrorKind::NotFound)?;
            let mut conn = TcpStream::connect_timeout(&target, Duration::from_secs(2))?;
            conn.set_read_timeout(Some(timeout))?;
            let mut hello = [0u8; 16];
            hello[..8].copy_from_slice(HELLO);
            hello[8..12].copy_from_slice(&(rank as u32).to_le_bytes());
            hello[12..16].copy_from_slice(&(size as u32).to_le_bytes());
            conn.write_all(&hello)?;
            let mut uid = [0u8; UID_BYTES];
            conn.read_exact(&mut uid)?;
            Ok(uid)
        })();
        match attempt {
            Ok(uid) => return Ok(uid),
            Err(e) => last_err = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(tcp_err(format!(
        "rank {rank} could not get the unique id from rank 0 at {addr}:{port} within {timeout:?} (last error: {last_err})"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `NVSHMEM_RS_BOOTSTRAP_TIMEOUT=inf` (or `1e20`) passed the "above 0" check and then
    /// panicked in `Duration::from_secs_f64` at start-up.
    #[test]
    fn timeouts_too_long_for_a_duration_are_refused_not_a_panic() {
        assert_eq!(parse_timeout(" 2.5 "), Some(Duration::from_millis(2500)));
        for bad in ["inf", "1e20", "NaN", "-1", "0", "1e-170", "soon", ""] {
            assert_eq!(parse_timeout(bad), None, "{bad}");
        }
    }

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[test]
    fn every_rank_receives_rank_zeros_id() {
        let port = free_port();
        let uid: UidBytes = std::array::from_fn(|i| (i * 7 + 3) as u8);
        let t = Duration::from_secs(20);
        let clients: Vec<_> = (1..4)
            .map(|r| std::thread::spawn(move || fetch_uid("127.0.0.1", port, r, 4, t)))
            .collect();
        serve_uid("127.0.0.1", port, 4, &uid, t).unwrap();
        for c in clients {
            assert_eq!(c.join().unwrap().unwrap(), uid);
        }
    }

    #[test]
    fn a_missing_rank_times_out_naming_it() {
        let port = free_port();
        let uid = [1u8; UID_BYTES];
        let t = Duration::from_millis(300);
        let c =
            std::thread::spawn(move || fetch_uid("127.0.0.1", port, 1, 3, Duration::from_secs(5)));
        let err = serve_uid("127.0.0.1", port, 3, &uid, t)
            .unwrap_err()
            .to_string();
        assert!(err.contains("ranks [2] did not connect"), "{err}");
        assert_eq!(c.join().unwrap().unwrap(), uid);
    }

    #[test]
    fn a_peer_of_another_job_size_is_refused() {
        let port = free_port();
        let c =
            std::thread::spawn(move || fetch_uid("127.0.0.1", port, 1, 5, Duration::from_secs(2)));
        let err = serve_uid(
            "127.0.0.1",
            port,
            2,
            &[0; UID_BYTES],
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("rank 1 of 5, but this job has 2"),
            "{err}"
        );
        assert!(c.join().unwrap().is_err());
    }

    #[test]
    fn no_server_means_a_timeout_error() {
        let port = free_port();
        let err = fetch_uid("127.0.0.1", port, 1, 2, Duration::from_millis(200)).unwrap_err();
        assert!(
            err.to_string().contains("could not get the unique id"),
            "{err}"
        );
    }

    #[test]
    fn uid_bytes_round_trip() {
        let bytes: UidBytes = std::array::from_fn(|i| i as u8);
        assert_eq!(uid_to_bytes(&uid_from_bytes(&bytes)), bytes);
    }
}
