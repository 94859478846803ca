//! Streaming object bodies between hyper and the synchronous engine, with bounded memory:
//! bytes move in 1 MiB chunks through a channel of two, so a request holds at most a few MiB
//! whatever the object size. Small objects go in one blocking call, without a channel.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use isthmus_store::{BoxedReader, BoxedWriter, ObjectInfo, RequestContext, Store, StoreError, StoreResult};

use crate::Gateway;
use crate::integrity::Declared;
use isthmus_session::{Placement, Runner};
use s3s::dto::StreamingBlob;
use s3s::stream::{ByteStream, RemainingLength};
use s3s::{S3Error, S3ErrorCode, StdError};
use tokio::sync::mpsc;

use crate::error::{join_error, s3_error};

/// The unit of transfer between the network and the file system.
pub const CHUNK: usize = 1 << 20;

/// A GET body as the engine produced it: whole (small objects, read in the same blocking call
/// that opened the file) or still to be streamed.
pub enum ObjectBody {
    Whole(Bytes),
    Stream(BoxedReader),
}

impl ObjectBody {
    /// Reads small bodies right away, in the engine call that opened the object.
    pub fn prefetch(mut reader: BoxedReader) -> StoreResult<Self> {
        let remaining = reader.remaining();
        if remaining > CHUNK as u64 {
            return Ok(Self::Stream(reader));
        }
        let mut buf = vec![0u8; remaining as usize];
        reader.read_exact(&mut buf).map_err(StoreError::from)?;
        Ok(Self::Whole(Bytes::from(buf)))
    }

    /// A body held whole in memory.
    pub fn whole(bytes: Bytes) -> StreamingBlob {
        StreamingBlob::new(WholeBody(Some(bytes)))
    }

    pub fn into_blob(self, runner: &Runner) -> StreamingBlob {
        match self {
            Self::Whole(bytes) => Self::whole(bytes),
            Self::Stream(reader) => {
                let remaining = reader.remaining();
                let (tx, rx) = mpsc::channel(2);
                // Only reads a descriptor the engine call already opened (and the kernel already
                // checked for the request's identity): no engine call, no identity switch.
                runner.stream_out(move || pump_reader(reader, &tx));
                StreamingBlob::new(ChannelBody { rx, remaining })
            }
        }
    }
}

/// Reads the object chunk by chunk into the channel until done, or until the client is gone.
fn pump_reader(mut reader: BoxedReader, tx: &mpsc::Sender<Result<Bytes, std::io::Error>>) {
    while reader.remaining() > 0 {
        let want = reader.remaining().min(CHUNK as u64) as usize;
        let mut buf = BytesMut::zeroed(want);
        let result = reader.read_exact(&mut buf).map(|()| buf.freeze());
        let failed = result.is_err();
        if tx.blocking_send(result).is_err() || failed {
            return;
        }
    }
}

/// A response body already in memory.
struct WholeBody(Option<Bytes>);

impl Stream for WholeBody {
    type Item = Result<Bytes, StdError>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.take().map(Ok))
    }
}

impl ByteStream for WholeBody {
    fn remaining_length(&self) -> RemainingLength {
        RemainingLength::new_exact(self.0.as_ref().map_or(0, Bytes::len))
    }
}

/// A response body fed by a blocking reader, with its exact length known up front.
struct ChannelBody {
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
    remaining: u64,
}

impl Stream for ChannelBody {
    type Item = Result<Bytes, StdError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(bytes))) => {
                self.remaining = self.remaining.saturating_sub(bytes.len() as u64);
                Poll::Ready(Some(Ok(bytes)))
            }
            Poll::Ready(Some(Err(err))) => {
                tracing::warn!(error = %err, "object read failed mid-stream");
                Poll::Ready(Some(Err(Box::new(err))))
            }
            Poll::Ready(None) => Poll::Ready(Some(Err("object reader stopped early".into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, None)
    }
}

impl ByteStream for ChannelBody {
    fn remaining_length(&self) -> RemainingLength {
        RemainingLength::new_exact(self.remaining as usize)
    }
}

/// The error a failed request body becomes: the S3 error s3s raised (bad chunk signature,
/// checksum), or an incomplete body.
fn body_error(err: StdError) -> S3Error {
    let err = match err.downcast::<S3Error>() {
        Ok(s3) => return *s3,
        Err(other) => other,
    };
    // s3s does not export its aws-chunked error type; its messages are stable names.
    let text = err.to_string();
    if text.contains("SignatureMismatch") {
        return S3Error::with_message(
            S3ErrorCode::SignatureDoesNotMatch,
            "The chunk signature of the streaming payload does not match",
        );
    }
    S3Error::with_message(S3ErrorCode::IncompleteBody, format!("The request body ended early or was malformed: {text}"))
}

/// Collects up to `CHUNK` bytes; returns the bytes and whether the body ended.
async fn fill(body: &mut StreamingBlob, buf: &mut BytesMut) -> Result<bool, S3Error> {
    while buf.len() < CHUNK {
        match body.next().await {
            Some(Ok(bytes)) => buf.extend_from_slice(&bytes),
            Some(Err(err)) => return Err(body_error(err)),
            None => return Ok(true),
        }
    }
    Ok(false)
}

/// Streams a request body into a new object. `open` creates the engine writer; the object
/// becomes visible only after the whole body arrived and `commit` succeeded. Any failure
/// discards the temporary file. A body of one chunk is written and committed in one engine
/// call placed as `placement` says; larger ones stream through a blocking task and commit on
/// the blocking pool (commits fsync).
///
/// With `authorize_first` (a client waiting for `100 Continue`), the writer is opened, which
/// is where the engine judges the write, before the body is first polled: hyper sends the
/// `100 Continue` at that poll, so a refused client gets its 403 without sending the body.
pub async fn write_object<F>(
    gw: &Gateway,
    cx: &RequestContext,
    mut body: StreamingBlob,
    declared: Declared,
    (placement, authorize_first): (Placement, bool),
    open: F,
) -> Result<ObjectInfo, S3Error>
where
    F: Fn(&dyn Store, &RequestContext) -> StoreResult<BoxedWriter> + Send + Sync + 'static,
{
    let open = std::sync::Arc::new(open);
    let mut opened = None;
    if authorize_first {
        let opener = open.clone();
        opened = Some(gw.call(cx, placement, move |store, cx| opener(store, cx)).await?);
    }
    let mut buf = BytesMut::with_capacity(CHUNK);
    if fill(&mut body, &mut buf).await? {
        let bytes = buf.freeze();
        let write_one = move |mut writer: BoxedWriter| {
            writer.write_all(&bytes)?;
            declared.check(&writer.digests())?;
            writer.commit()
        };
        return match opened {
            None => gw.call(cx, placement, move |store, cx| write_one(open(store, cx)?)).await,
            // Committing may fsync: on the blocking pool, as a streamed body's commit.
            Some(writer) => {
                gw.runner.stream(cx, move |_, _| write_one(writer)).await.map_err(join_error)?.map_err(s3_error)
            }
        };
    }
    let (tx, mut rx) = mpsc::channel::<Bytes>(2);
    let task = gw.runner.stream(cx, move |store, cx| -> StoreResult<BoxedWriter> {
        let mut writer = match opened {
            Some(writer) => writer,
            None => open(store, cx)?,
        };
        while let Some(chunk) = rx.blocking_recv() {
            writer.write_all(&chunk)?;
        }
        Ok(writer)
    });
    let received: Result<(), S3Error> = async {
        loop {
            let done = fill(&mut body, &mut buf).await?;
            if !buf.is_empty() && tx.send(buf.split().freeze()).await.is_err() {
                // The writer failed; its error is reported below.
                return Ok(());
            }
            if done {
                return Ok(());
            }
            buf.reserve(CHUNK);
        }
    }
    .await;
    drop(tx);
    let writer = task.await.map_err(join_error)?;
    // A body error wins over the writer's result: the writer is dropped, which discards it.
    received?;
    let writer = writer.map_err(s3_error)?;
    // The body and its trailers are complete: verify before anything becomes visible.
    declared.check(&writer.digests()).map_err(s3_error)?;
    // Committing fsyncs in strict mode: always off the async workers.
    gw.runner.stream(cx, move |_, _| writer.commit()).await.map_err(join_error)?.map_err(s3_error)
}
