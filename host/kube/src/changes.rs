//! Change delivery (WIT `client.changes`): one watch per collection and identity, kept open
//! across calls and component instances, whose changes are held in a bounded buffer and handed
//! out by bookmark. A component instance stays short-lived and stateless: it keeps the bookmark
//! (in SQL, say) and asks again next time; an idle follower costs no API request.
//!
//! A feed starts with a LIST of one item, for the collection's current resourceVersion, and
//! watches from there. It does not hold the collection itself (no reflector): the component reads
//! that with its own full pass, after it got its first bookmark, so every change after the
//! bookmark is delivered at least once. A watch that ends is resumed from the last version seen,
//! losing nothing; one whose version expired (410) is started again from a new LIST, and since the
//! changes in between are unknown, the feed gets a new epoch, which turns every bookmark of the
//! old one `gone`: the component relists. So does a bookmark whose changes fell out of the buffer
//! ([`BUFFER`]) or came from another process.
//!
//! Bookmarks are `<epoch>.<sequence>`: the feed's epoch and the number of changes it had
//! received before the next one to deliver.
//!
//! A client made [`KubeClient::with_waker`] registers its waker with every feed it asks; the feed
//! wakes it on each change it receives and when its followers must start over, so a follower can
//! act at once instead of at its next scheduled pass.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use kube::client::Body;
use kube::core::Request;
use kube::core::params::WatchParams;

use lethe_retry::{Budget, Policy, Setback};

use crate::discovery::Resolved;
use crate::error::{KubeError, Result};
use crate::parse::{self, WatchEvent};
use crate::types::{Change, ChangeBatch, Collection, ListOptions, Status};
use crate::{KubeClient, build_error};

/// Changes a feed keeps for followers that have not fetched them yet.
pub const BUFFER: usize = 10_000;

/// The most changes one call returns.
pub const MAX_BATCH: u32 = 5_000;

/// How many collections may be followed at once (all identities).
const MAX_FEEDS: usize = 256;

/// A feed nobody asked for in this long stops watching.
const IDLE: Duration = Duration::from_secs(600);

/// How long one watch request runs before the feed renews it, as client-go's reflector does
/// (it picks 5 to 10 minutes).
const WATCH_SECONDS: u32 = 290;

/// The backoff before a watch that failed is resumed: from 1 s up to 30 s, for as long as the
/// feed is followed (a watch that ends cleanly starts it afresh).
const WATCH_RESUME: Policy =
    Policy::until_deadline(Duration::from_secs(1), Duration::from_secs(30));

/// Who a feed watches as: the privileged identity, or a caller by their token's hash.
type FeedKey = (Option<[u8; 32]>, Collection);

/// The feeds of one cluster.
#[derive(Default)]
pub(crate) struct Feeds {
    feeds: Mutex<HashMap<FeedKey, Arc<Feed>>>,
}

/// One followed collection.
struct Feed {
    state: Mutex<FeedState>,
    /// Bumped whenever the state changes, so that a waiting call wakes up.
    version: tokio::sync::watch::Sender<u64>,
    /// Who asked to be woken when the collection changes ([`KubeClient::with_waker`]).
    followers: Mutex<Vec<std::sync::Weak<tokio::sync::Notify>>>,
}

struct FeedState {
    /// `None` until the first LIST answered.
    epoch: Option<String>,
    /// The sequence number of `buffer.front()`.
    first: u64,
    buffer: VecDeque<Change>,
    /// Why the feed stopped, if it did; the next call starts a new one.
    failed: Option<KubeError>,
    last_asked: Instant,
}

impl FeedState {
    fn next(&self) -> u64 {
        self.first + self.buffer.len() as u64
    }
}

/// A new epoch: unique within this process, and unlikely to repeat in another.
fn new_epoch() -> String {
    static PROCESS: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let process = *PROCESS.get_or_init(rand::random::<u64>);
    format!(
        "{process:016x}{:x}",
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn gone(message: impl Into<String>) -> KubeError {
    KubeError::Gone(Status {
        code: 410,
        reason: "Expired".into(),
        message: message.into(),
    })
}

impl Feed {
    fn touch(&self) {
        self.update(|s| s.last_asked = Instant::now());
    }

    fn update<T>(&self, f: impl FnOnce(&mut FeedState) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let out = f(&mut state);
        drop(state);
        self.version.send_modify(|v| *v += 1);
        out
    }

    /// Wakes `waker` whenever the collection changes from now on (or the feed must start over),
    /// for as long as someone holds it.
    fn follow_by(&self, waker: &Arc<tokio::sync::Notify>) {
        let mut followers = self
            .followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        followers.retain(|f| f.strong_count() > 0);
        if !followers
            .iter()
            .any(|f| std::ptr::eq(f.as_ptr(), Arc::as_ptr(waker)))
        {
            followers.push(Arc::downgrade(waker));
        }
    }

    /// Tells the followers that there is something new to fetch: changes, or a `gone`.
    fn wake_followers(&self) {
        let followers = self
            .followers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for waker in followers.iter().filter_map(std::sync::Weak::upgrade) {
            waker.notify_one();
        }
    }

    fn read<T>(&self, f: impl FnOnce(&FeedState) -> T) -> T {
        f(&self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The changes after bookmark `since` (`None`: none, and the current bookmark).
    fn batch(&self, since: Option<&str>, max: u32) -> Result<ChangeBatch> {
        self.read(|s| {
            let epoch = s.epoch.as_deref().unwrap_or_default();
            let Some(since) = since else {
                return Ok(ChangeBatch {
                    changes: Vec::new(),
                    bookmark: format!("{epoch}.{}", s.next()),
                    more: false,
                });
            };
            let seq = match since.split_once('.') {
                Some((e, seq)) if e == epoch => seq.parse::<u64>().ok(),
                _ => None,
            };
            let Some(seq) = seq.filter(|seq| *seq <= s.next()) else {
                return Err(gone(
                    "the bookmark is not one of this watch's (the host restarted, or the watch was \
                     relisted after its resourceVersion expired): list the collection again",
                ));
            };
            if seq < s.first {
                return Err(gone(format!(
                    "{} changes since the bookmark were dropped before they were fetched: list the \
                     collection again",
                    s.first - seq
                )));
            }
            let from = usize::try_from(seq - s.first).unwrap_or(usize::MAX);
            let take = usize::try_from(max.clamp(1, MAX_BATCH)).unwrap_or(1);
            let changes: Vec<Change> = s.buffer.iter().skip(from).take(take).cloned().collect();
            let to = seq + changes.len() as u64;
            Ok(ChangeBatch {
                more: to < s.next(),
                changes,
                bookmark: format!("{epoch}.{to}"),
            })
        })
    }
}

impl Feeds {
    /// The feed of `collection` for `client`'s identity, started if there is none.
    fn feed(
        &self,
        client: &KubeClient,
        collection: &Collection,
        resolved: Resolved,
    ) -> Result<Arc<Feed>> {
        let key = (client.token_key, collection.clone());
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(feed) = feeds.get(&key) {
            if feed.read(|s| s.failed.is_none()) {
                feed.touch();
                return Ok(feed.clone());
            }
            feeds.remove(&key);
        }
        if feeds.len() >= MAX_FEEDS {
            return Err(KubeError::Unavailable(format!(
                "the host already follows {MAX_FEEDS} collections"
            )));
        }
        let feed = Arc::new(Feed {
            state: Mutex::new(FeedState {
                epoch: None,
                first: 0,
                buffer: VecDeque::new(),
                failed: None,
                last_asked: Instant::now(),
            }),
            version: tokio::sync::watch::Sender::new(0),
            followers: Mutex::new(Vec::new()),
        });
        feeds.insert(key.clone(), feed.clone());
        // The feed's own requests run without the caller's deadline or rate limit: they are the
        // host's, shared by every follower, and bounded by the watch's own backoff.
        let mut watcher = client.clone();
        watcher.deadline = None;
        watcher.admission = None;
        watcher.waker = None;
        tokio::spawn(follow(
            feed.clone(),
            watcher,
            collection.clone(),
            resolved,
            key,
        ));
        Ok(feed)
    }

    fn forget(&self, key: &FeedKey, feed: &Arc<Feed>) {
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        if feeds.get(key).is_some_and(|f| Arc::ptr_eq(f, feed)) {
            feeds.remove(key);
        }
    }

    /// How many collections are followed now.
    pub fn len(&self) -> usize {
        self.feeds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl KubeClient {
    /// The changes in `collection` since bookmark `since`: at most `max` (1 to [`MAX_BATCH`]),
    /// oldest first, with the next bookmark. `since: None` starts following and answers no
    /// changes and the bookmark to start from; the caller reads the collection after that.
    /// [`KubeError::Gone`] tells it to read the whole collection again and start over. See the
    /// module documentation for what the host keeps.
    pub async fn changes(
        &self,
        collection: &Collection,
        since: Option<&str>,
        max: u32,
    ) -> Result<ChangeBatch> {
        let resolved = self
            .resolve(&collection.api_version, &collection.kind)
            .await?;
        let mut collection = collection.clone();
        if !resolved.namespaced {
            collection.namespace = None;
        }
        if let Some(ns) = &collection.namespace {
            crate::check_segment("namespace", ns)?;
        }
        let feed = self.cluster.inner.feeds.feed(self, &collection, resolved)?;
        if let Some(waker) = &self.waker {
            feed.follow_by(waker);
        }
        let mut version = feed.version.subscribe();
        loop {
            let started = feed.read(|s| match &s.failed {
                Some(e) => Err(e.clone()),
                None => Ok(s.epoch.is_some()),
            })?;
            if started {
                return feed.batch(since, max);
            }
            let wait = version.changed();
            match self.deadline {
                Some(at) => {
                    let at = tokio::time::Instant::from_std(at);
                    match tokio::time::timeout_at(at, wait).await {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => {
                            return Err(KubeError::Unavailable("the watch stopped".into()));
                        }
                        Err(_) => {
                            return Err(KubeError::Timeout(
                                "the watch did not start within the call's time limit".into(),
                            ));
                        }
                    }
                }
                None => {
                    if wait.await.is_err() {
                        return Err(KubeError::Unavailable("the watch stopped".into()));
                    }
                }
            }
        }
    }
}

/// How one watch request ended.
enum WatchEnd {
    /// The server closed it (its timeout, a restart): resume from the last version.
    Closed,
    /// The version expired: list again, with a new epoch.
    Expired,
    /// A failure that a retry may cure (connection, 5xx, 429).
    Transient(String),
    /// A failure that it cannot (forbidden, unauthorized, invalid selector).
    Fatal(KubeError),
}

/// The feed's life: LIST for a version, WATCH from it, resume, relist on 410, stop when idle.
async fn follow(
    feed: Arc<Feed>,
    client: KubeClient,
    collection: Collection,
    resolved: Resolved,
    key: FeedKey,
) {
    let feeds = client.cluster.clone();
    let forget = || feeds.inner.feeds.forget(&key, &feed);
    let mut resume = Budget::new(WATCH_RESUME);
    'relist: loop {
        let options = ListOptions {
            label_selector: collection.label_selector.clone(),
            limit: Some(1),
            ..Default::default()
        };
        let listed = client
            .list(
                &collection.api_version,
                &collection.kind,
                collection.namespace.as_deref(),
                &options,
            )
            .await;
        let mut version = match listed {
            Ok(list) => list.resource_version,
            Err(e) => {
                tracing::debug!(kind = %collection.kind, error = %e, "cannot start following a collection");
                feed.update(|s| s.failed = Some(e));
                feed.wake_followers();
                forget();
                return;
            }
        };
        let relisted = feed.update(|s| {
            let relisted = s.epoch.is_some();
            s.epoch = Some(new_epoch());
            s.first = 0;
            s.buffer.clear();
            relisted
        });
        if relisted {
            // Every bookmark is gone now: followers should relist soon, not at their next tick.
            feed.wake_followers();
        }
        loop {
            if feed.read(|s| s.last_asked.elapsed() > IDLE) {
                forget();
                return;
            }
            match watch_once(&client, &collection, &resolved, &feed, &mut version).await {
                WatchEnd::Closed => resume = Budget::new(WATCH_RESUME),
                WatchEnd::Expired => {
                    tracing::info!(kind = %collection.kind, "watch expired; listing again (followers relist)");
                    continue 'relist;
                }
                WatchEnd::Transient(why) => {
                    let delay = resume
                        .next(Setback::Failed, None, None, rand::random())
                        .unwrap_or(WATCH_RESUME.max_delay);
                    tracing::debug!(kind = %collection.kind, error = %why, ?delay, "watch failed; resuming");
                    tokio::time::sleep(delay).await;
                }
                WatchEnd::Fatal(e) => {
                    tracing::warn!(kind = %collection.kind, error = %e, "watch refused; the feed stops");
                    feed.update(|s| s.failed = Some(e));
                    feed.wake_followers();
                    forget();
                    return;
                }
            }
        }
    }
}

/// One watch request from `version`, its changes appended to the feed as they come.
async fn watch_once(
    client: &KubeClient,
    collection: &Collection,
    resolved: &Resolved,
    feed: &Feed,
    version: &mut String,
) -> WatchEnd {
    let mut params = WatchParams::default().timeout(WATCH_SECONDS);
    params.bookmarks = true;
    if let Some(selector) = &collection.label_selector {
        params = params.labels(selector);
    }
    let request = Request::new(resolved.collection_path(collection.namespace.as_deref()))
        .watch(&params, version)
        .map_err(build_error);
    let request = match request {
        Ok(r) => r,
        Err(e) => return WatchEnd::Fatal(e),
    };
    let response = match client.client.send(request.map(Body::from)).await {
        Ok(r) => r,
        Err(e) => return WatchEnd::Transient(e.to_string()),
    };
    let code = response.status().as_u16();
    if !(200..300).contains(&code) {
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes().to_vec())
            .unwrap_or_default();
        return match code {
            410 => WatchEnd::Expired,
            429 | 500..=599 => WatchEnd::Transient(format!("the server answered {code}")),
            _ => WatchEnd::Fatal(KubeError::from_status(parse::status(code, &body))),
        };
    }
    let api_version = &resolved.resource.api_version;
    let kind = &resolved.resource.kind;
    let mut body = response.into_body();
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let frame = match body.frame().await {
            None => return WatchEnd::Closed,
            Some(Err(e)) => return WatchEnd::Transient(e.to_string()),
            Some(Ok(frame)) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match parse::watch_event(line, api_version, kind) {
                Ok(WatchEvent::Error(status)) if status.code == 410 => return WatchEnd::Expired,
                Ok(WatchEvent::Error(status)) => {
                    return WatchEnd::Transient(format!("{} {}", status.code, status.message));
                }
                Ok(event) => {
                    if let Some(rv) = event.resource_version().filter(|rv| !rv.is_empty()) {
                        *version = rv.to_owned();
                    }
                    if let WatchEvent::Change(change) = event {
                        feed.update(|s| {
                            s.buffer.push_back(*change);
                            if s.buffer.len() > BUFFER {
                                s.buffer.pop_front();
                                s.first += 1;
                            }
                        });
                        feed.wake_followers();
                    }
                }
                Err(e) => return WatchEnd::Transient(e.to_string()),
            }
        }
    }
}
