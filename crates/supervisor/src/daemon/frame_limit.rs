//! What a client can make the supervisor hold: a frame must arrive whole
//! within [`FRAME_TIMEOUT`] of its first byte, and the partial frames of all
//! connections together hold at most [`FRAME_BUDGET`] bytes. A frame's body
//! grows as its bytes arrive (never allocated whole from its header), and
//! its declared length is reserved against the budget first: a frame the
//! budget cannot hold is refused, never buffered. Without these a client
//! that sent a 16 MiB header and most of its body, then stalled, held
//! 16 MiB until it hung up (twenty such clients: 345 MB).

use super::protocol::{Frame, FrameError, check_len, split};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

/// How long a frame may take to arrive once its first byte has (a local
/// client writes a whole frame in milliseconds; idling between frames is
/// not bounded here: the connection cap bounds idle clients).
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes that the partial frames of every connection may hold together:
/// three frames of the largest size.
pub const FRAME_BUDGET: usize = 3 * super::protocol::MAX_FRAME;
/// Bytes past [`FRAME_BUDGET`] that only small frames may hold: while slow
/// clients hold the whole budget with large partial frames, a small request
/// (`pane ls`, a ping) is still read.
pub const SMALL_RESERVE: usize = 4 * 1024 * 1024;
/// The largest frame the reserve takes.
pub const SMALL_FRAME: usize = 64 * 1024;
/// A frame's body is read in pieces of at most this many bytes.
const READ_CHUNK: usize = 64 * 1024;

/// The supervisor's budget for partial frames.
pub static BUDGET: Budget = Budget::with_reserve(FRAME_BUDGET, SMALL_RESERVE, SMALL_FRAME);

/// Bytes reserved by frames being read, against a limit.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    /// Bytes past `limit` for frames of at most `small` bytes.
    reserve: usize,
    small: usize,
    held: AtomicUsize,
}

/// A frame's share of a [`Budget`]; given back when dropped.
struct Share<'a> {
    budget: &'a Budget,
    n: usize,
}

impl Drop for Share<'_> {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.n, Ordering::AcqRel);
    }
}

impl Budget {
    /// A budget of `limit` bytes, none held.
    pub const fn new(limit: usize) -> Self {
        Budget::with_reserve(limit, 0, 0)
    }

    /// A budget of `limit` bytes and `reserve` more that only frames of at
    /// most `small` bytes may take.
    pub const fn with_reserve(limit: usize, reserve: usize, small: usize) -> Self {
        Budget {
            limit,
            reserve,
            small,
            held: AtomicUsize::new(0),
        }
    }

    /// Bytes reserved now by frames being read.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Reserve `n` bytes, or `None` when that would pass the limit.
    fn reserve(&self, n: usize) -> Option<Share<'_>> {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                let cap = if n <= self.small {
                    self.limit.saturating_add(self.reserve)
                } else {
                    self.limit
                };
                h.checked_add(n).filter(|t| *t <= cap)
            })
            .ok()
            .map(|_| Share { budget: self, n })
    }
}

/// Read one frame within [`FRAME_TIMEOUT`] of its first byte, its body
/// held against `budget`. `Ok(None)` on a clean EOF between frames.
pub async fn read_frame(
    r: &mut (impl AsyncRead + Unpin),
    budget: &Budget,
) -> Result<Option<Frame>, FrameError> {
    read_frame_within(r, budget, FRAME_TIMEOUT).await
}

/// [`read_frame`] with the time bound `within`.
pub async fn read_frame_within(
    r: &mut (impl AsyncRead + Unpin),
    budget: &Budget,
    within: Duration,
) -> Result<Option<Frame>, FrameError> {
    let mut first = [0u8; 1];
    loop {
        match r.read(&mut first).await {
            Ok(0) => return Ok(None),
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    match tokio::time::timeout(within, rest(r, first[0], budget)).await {
        Ok(r) => r.map(Some),
        Err(_) => Err(FrameError::Incomplete(within)),
    }
}

/// The frame after its first byte.
async fn rest(
    r: &mut (impl AsyncRead + Unpin),
    first: u8,
    budget: &Budget,
) -> Result<Frame, FrameError> {
    let mut head = [first, 0, 0, 0];
    r.read_exact(&mut head[1..]).await?;
    let len = check_len(u32::from_be_bytes(head))?;
    let _share = budget.reserve(len).ok_or(FrameError::OverBudget {
        len,
        held: budget.held(),
    })?;
    let mut body: Vec<u8> = Vec::new();
    while body.len() < len {
        let start = body.len();
        let want = (len - start).min(READ_CHUNK);
        if body.capacity() < start + want {
            // Doubling, but never past the frame's length.
            let cap = (body.capacity() * 2).max(start + want).min(len);
            body.reserve_exact(cap - start);
        }
        body.resize(start + want, 0);
        let n = r.read(&mut body[start..]).await?;
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
        body.truncate(start + n);
    }
    split(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::protocol::{FrameKind, encode};
    use tokio::io::AsyncWriteExt;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Guards: a frame whose sender stalls after part of it is given up
    /// after the bound, and what it held is given back.
    #[test]
    fn a_stalled_partial_frame_times_out_and_frees_its_share() {
        rt().block_on(async {
            let budget = Budget::new(1 << 20);
            let (mut client, mut server) = tokio::io::duplex(1 << 16);
            let whole = encode(FrameKind::Json, &[b'x'; 1000]);
            client.write_all(&whole[..500]).await.unwrap();
            let t0 = std::time::Instant::now();
            let r = read_frame_within(&mut server, &budget, Duration::from_millis(100)).await;
            assert!(matches!(r, Err(FrameError::Incomplete(_))), "{r:?}");
            assert!(t0.elapsed() < Duration::from_secs(5));
            assert_eq!(budget.held(), 0);
        });
    }

    /// Guards: frames that together pass the budget are refused from their
    /// header, before any body is buffered; a whole frame still reads.
    #[test]
    fn frames_past_the_budget_are_refused_from_their_header() {
        rt().block_on(async {
            let budget = Budget::new(3000);
            let (mut c1, mut s1) = tokio::io::duplex(1 << 16);
            let big = encode(FrameKind::Json, &[b'y'; 2000]);
            c1.write_all(&big[..100]).await.unwrap();
            // The first frame holds 2001 bytes of the budget while it waits.
            let hold =
                async { read_frame_within(&mut s1, &budget, Duration::from_millis(300)).await };
            let other = async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert_eq!(budget.held(), 2001);
                let (mut c2, mut s2) = tokio::io::duplex(1 << 16);
                c2.write_all(&big).await.unwrap();
                let r = read_frame_within(&mut s2, &budget, Duration::from_secs(1)).await;
                assert!(
                    matches!(r, Err(FrameError::OverBudget { len: 2001, .. })),
                    "{r:?}"
                );
                let small = encode(FrameKind::Json, b"{}");
                let (mut c3, mut s3) = tokio::io::duplex(1 << 16);
                c3.write_all(&small).await.unwrap();
                let f = read_frame_within(&mut s3, &budget, Duration::from_secs(1)).await;
                assert_eq!(f.unwrap().unwrap().payload, b"{}");
            };
            let (held, ()) = tokio::join!(hold, other);
            assert!(matches!(held, Err(FrameError::Incomplete(_))));
            assert_eq!(budget.held(), 0);
        });
    }

    /// Guards issue 37 item 10: while slow clients hold the whole budget,
    /// a small whole frame (a 40-byte `pane ls`) is still read from the
    /// reserve; a large one, or a small one past the reserve, is refused.
    #[test]
    fn a_small_frame_is_read_while_the_budget_is_held() {
        rt().block_on(async {
            let budget = Budget::with_reserve(3000, 600, 256);
            let (mut c1, mut s1) = tokio::io::duplex(1 << 16);
            let big = encode(FrameKind::Json, &[b'y'; 2999]);
            c1.write_all(&big[..100]).await.unwrap();
            let hold =
                async { read_frame_within(&mut s1, &budget, Duration::from_millis(400)).await };
            let other = async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert_eq!(budget.held(), 3000, "the budget is held whole");
                let ls = encode(
                    FrameKind::Json,
                    br#"{"v":1,"id":1,"op":"pane.ls","args":{}}"#,
                );
                let (mut c2, mut s2) = tokio::io::duplex(1 << 16);
                c2.write_all(&ls).await.unwrap();
                let f = read_frame_within(&mut s2, &budget, Duration::from_secs(1)).await;
                assert!(matches!(f, Ok(Some(_))), "a small frame is read: {f:?}");
                for len in [299, 700] {
                    let (mut c3, mut s3) = tokio::io::duplex(1 << 16);
                    c3.write_all(&encode(FrameKind::Json, &vec![b'z'; len]))
                        .await
                        .unwrap();
                    let r = read_frame_within(&mut s3, &budget, Duration::from_secs(1)).await;
                    assert!(
                        matches!(r, Err(FrameError::OverBudget { .. })),
                        "{len}: {r:?}"
                    );
                }
            };
            let (held, ()) = tokio::join!(hold, other);
            assert!(matches!(held, Err(FrameError::Incomplete(_))));
            assert_eq!(budget.held(), 0);
        });
    }

    /// A frame that arrives in pieces reads whole; EOF between frames is none.
    #[test]
    fn a_frame_in_pieces_reads_whole() {
        rt().block_on(async {
            let budget = Budget::new(1 << 20);
            let (mut client, mut server) = tokio::io::duplex(64);
            let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
            let whole = encode(FrameKind::Input, &payload);
            let writer = tokio::spawn(async move {
                for part in whole.chunks(7000) {
                    client.write_all(part).await.unwrap();
                }
            });
            let f = read_frame(&mut server, &budget).await.unwrap().unwrap();
            writer.await.unwrap();
            assert_eq!(f.kind, FrameKind::Input);
            assert_eq!(f.payload, payload);
            assert!(read_frame(&mut server, &budget).await.unwrap().is_none());
            assert_eq!(budget.held(), 0);
        });
    }
}
