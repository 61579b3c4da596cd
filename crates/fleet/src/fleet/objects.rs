//! The fleet's objects (docs/fleet.md), each written without a rollup (the
//! stores refuse them) and read back checked by its size and sha256:
//!
//! - `drover-<fleet>-objects`, the coordinator's: base bundles and the
//!   candidates it sends. Only the fleet's creator writes it; hosts read it.
//! - `drover-<fleet>-objects-<host>`, one per host: that host's patches.
//!   Only that host's user writes it; the coordinator makes it (a host may
//!   not choose a stream's config) and reads a step's candidate only from
//!   the bucket of the host the step was handed to.

use super::work::{MAX_OBJECT, OBJECTS_MAX_AGE, ObjectRef};
use super::{FleetError, Names};
use async_nats::jetstream;
use jetstream::object_store::ObjectStore;
use sha2::Digest;

impl Names {
    /// Host `host`'s own object bucket (its patches).
    pub fn host_objects_bucket(&self, host: &str) -> String {
        format!("{}-{host}", self.objects_bucket())
    }

    /// The stream under host `host`'s object bucket.
    pub fn host_objects_stream(&self, host: &str) -> String {
        format!("OBJ_{}", self.host_objects_bucket(host))
    }
}

/// The object store `bucket` (stream `OBJ_<bucket>`), made when missing as
/// its stream directly, with rollups, message deletes and purges refused:
/// a store the client makes allows a `Nats-Rollup: all` header, with which
/// any writer could erase every object. Objects are written by
/// [`put_bytes`] without one and expire by age.
async fn make(
    js: &jetstream::Context,
    names: &Names,
    bucket: &str,
    what: &str,
) -> Result<jetstream::stream::Stream, FleetError> {
    js.get_or_create_stream(jetstream::stream::Config {
        name: format!("OBJ_{bucket}"),
        description: Some(format!("drover fleet {}: {what}", names.fleet)),
        subjects: vec![format!("$O.{bucket}.C.>"), format!("$O.{bucket}.M.>")],
        max_age: OBJECTS_MAX_AGE,
        storage: jetstream::stream::StorageType::File,
        num_replicas: names.replicas,
        discard: jetstream::stream::DiscardPolicy::New,
        allow_direct: true,
        allow_rollup: false,
        deny_delete: true,
        deny_purge: true,
        ..Default::default()
    })
    .await
    .map_err(|e| super::work::stream_error("open the object store", e))
}

/// The fleet's object store (the coordinator's), made when missing. One an
/// older drover made allows rollups: it is turned off in place where this
/// user may update streams, else refused, saying how to remake the store.
pub async fn objects(js: &jetstream::Context, names: &Names) -> Result<ObjectStore, FleetError> {
    let bucket = names.objects_bucket();
    let mut stream = make(
        js,
        names,
        &bucket,
        "base bundles and the candidates its coordinator sends",
    )
    .await?;
    let config = stream
        .info()
        .await
        .map_err(|e| FleetError::bus("read the object store", e))?
        .config
        .clone();
    if config.allow_rollup {
        let mut fixed = config;
        fixed.allow_rollup = false;
        match js.update_stream(&fixed).await {
            Ok(_) => tracing::info!(
                bucket = %bucket,
                "the object store allowed rollups (an older drover made it); it refuses them now"
            ),
            Err(_) => {
                return Err(FleetError::RollupStore {
                    stream: names.objects_stream(),
                });
            }
        }
    }
    js.get_object_store(&bucket)
        .await
        .map_err(|e| FleetError::bus("open the object store", e))
}

/// Host `host`'s object bucket, made when missing (by the coordinator).
pub async fn host_objects(
    js: &jetstream::Context,
    names: &Names,
    host: &str,
) -> Result<ObjectStore, FleetError> {
    super::subjects::check_id("host", host)?;
    let bucket = names.host_objects_bucket(host);
    make(js, names, &bucket, &format!("host {host}'s patches")).await?;
    open_host_objects(js, names, host).await
}

/// Host `host`'s object bucket as it is (a host never makes its own).
pub async fn open_host_objects(
    js: &jetstream::Context,
    names: &Names,
    host: &str,
) -> Result<ObjectStore, FleetError> {
    js.get_object_store(names.host_objects_bucket(host))
        .await
        .map_err(|e| FleetError::bus("open a host's object bucket", e))
}

/// Base64, URL-safe alphabet, padded (how the object store names an
/// object's meta subject).
fn base64_url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Chunks an object is written in.
const CHUNK: usize = 128 * 1024;

/// The sha256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Store `bytes` as `name` in the object store `bucket` (`store`); an
/// object of that name already holding the same bytes is kept as it is.
pub async fn put_bytes(
    js: &jetstream::Context,
    bucket: &str,
    store: &ObjectStore,
    name: &str,
    bytes: &[u8],
) -> Result<ObjectRef, FleetError> {
    let r = ObjectRef {
        name: name.to_string(),
        sha256: sha256_hex(bytes),
        size: bytes.len() as u64,
    };
    if let Ok(have) = get_bytes(store, &r).await
        && have.len() as u64 == r.size
    {
        return Ok(r);
    }
    // Written as the object store writes, less the rollup of its meta
    // record (the store refuses rollups): chunks, then the meta record.
    let stamp = format!(
        "{name}/{}/{:?}",
        std::process::id(),
        std::time::SystemTime::now()
    );
    let nuid = sha256_hex(stamp.as_bytes());
    let nuid = &nuid[..22];
    let chunk_subject = format!("$O.{bucket}.C.{nuid}");
    let mut chunks = 0;
    for c in bytes.chunks(CHUNK) {
        js.publish(chunk_subject.clone(), c.to_vec().into())
            .await
            .map_err(|e| FleetError::bus("store an object", e))?
            .await
            .map_err(|e| FleetError::bus("store an object", e))?;
        chunks += 1;
    }
    let meta = serde_json::json!({
        "name": name,
        "bucket": bucket,
        "nuid": nuid,
        "size": bytes.len(),
        "chunks": chunks,
        "options": {"max_chunk_size": CHUNK},
        "digest": format!("SHA-256={}", base64_url(&sha2::Sha256::digest(bytes))),
    });
    js.publish(
        format!("$O.{bucket}.M.{}", base64_url(name.as_bytes())),
        meta.to_string().into(),
    )
    .await
    .map_err(|e| FleetError::bus("store an object", e))?
    .await
    .map_err(|e| FleetError::bus("store an object", e))?;
    Ok(r)
}

/// The bytes of `r`, checked against its size and sha256.
pub async fn get_bytes(store: &ObjectStore, r: &ObjectRef) -> Result<Vec<u8>, FleetError> {
    use tokio::io::AsyncReadExt;
    let mut obj = store
        .get(&r.name)
        .await
        .map_err(|e| FleetError::bus("fetch an object", e))?;
    // Never more than the stated size (bounded by [`MAX_OBJECT`]) is read:
    // a bigger object is refused before its bytes are.
    let stored = obj.info().size as u64;
    if stored != r.size || r.size > MAX_OBJECT {
        return Err(FleetError::Bus {
            op: "fetch an object",
            message: format!(
                "object {} is not what was stated ({stored} bytes stored; want {} bytes, at most {MAX_OBJECT})",
                r.name, r.size
            ),
        });
    }
    let mut bytes = Vec::with_capacity(stored as usize);
    obj.read_to_end(&mut bytes)
        .await
        .map_err(|e| FleetError::bus("fetch an object", e))?;
    if bytes.len() as u64 != r.size || sha256_hex(&bytes) != r.sha256 {
        return Err(FleetError::Bus {
            op: "fetch an object",
            message: format!(
                "object {} is not what was stored ({} bytes, sha256 {}; want {} bytes, {})",
                r.name,
                bytes.len(),
                sha256_hex(&bytes),
                r.size,
                r.sha256
            ),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_base64_url_padded() {
        assert_eq!(base64_url(b"a"), "YQ==");
        assert_eq!(base64_url(b"ab"), "YWI=");
        assert_eq!(base64_url(b"abc"), "YWJj");
        assert_eq!(base64_url(b"\xfb\xff"), "-_8=");
    }
}
