//! Segments read back exactly what was written, refuse what was changed, and a team opened
//! from segments answers and takes writes exactly like the team they were written from.

use proptest::prelude::*;

use super::*;
use crate::plan::Limits;
use crate::schema::records::KINDS;
use crate::testing::compare::group_choice;
use crate::testing::data::{Dataset, arb_dataset};
use crate::testing::{Choices, Pool, arb_analytics_request};
use crate::wire::AnalyticsRequest;

/// A dataset's batches through `prepare` and `apply`, from batch `from` on, onto `team`.
fn apply_from(team: &mut TeamData, data: &Dataset, from: usize) {
    for (i, batch) in data.parsed().iter().enumerate().skip(from) {
        let now = Timestamp(1_746_000_000_000_000 + i as i64 * 1_000_000);
        let batch = team
            .prepare(batch, now)
            .expect("generated batches are consistent");
        team.apply(&batch);
    }
}

/// A team made of nothing but `team`'s segments.
fn reopened(team: &TeamData) -> TeamData {
    let mut back = TeamData::new();
    for kind in TeamData::segment_kinds() {
        if let Some(bytes) = team.segment(kind) {
            assert_eq!(back.load_segment(&bytes), Ok(kind));
        }
    }
    back
}

/// Both teams hold the same records of every kind, in the same row order.
fn same_records(a: &TeamData, b: &TeamData) -> Result<(), TestCaseError> {
    for kind in KINDS {
        let x: Vec<&Record> = a.records(kind).collect();
        let y: Vec<&Record> = b.records(kind).collect();
        prop_assert_eq!(x, y, "{}", kind.name);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Written, read back, written to again: the same records and the same answers as the
    /// team that never left memory (the identity index is rebuilt on the first write).
    #[test]
    fn a_team_reopened_from_segments_is_the_same_team(
        data in arb_dataset(Pool::default()),
        req in arb_analytics_request(Pool::default()),
        choices in proptest::collection::vec(any::<u32>(), 4),
        split in 0usize..8,
    ) {
        let mut team = TeamData::new();
        let split = split.min(data.batches.len());
        apply_from(&mut team, &Dataset { batches: data.batches[..split].to_vec() }, 0);
        let mut back = reopened(&team);
        same_records(&team, &back)?;
        apply_from(&mut team, &data, split);
        apply_from(&mut back, &data, split);
        same_records(&team, &back)?;
        let mut c = Choices::new(choices);
        let req = AnalyticsRequest { group_name: group_choice(&data, &mut c), ..req };
        let plan = crate::validate::analytics(&req, &Limits::default())
            .map_err(|e| TestCaseError::fail(format!("invalid request: {e:?}")))?;
        let limits = Limits::default();
        prop_assert_eq!(team.analytics(&plan, &limits), back.analytics(&plan, &limits));
        same_records(&team, &reopened(&back))?;
    }

    /// A batch through [`encode_batch`] and [`decode_batch`] applies like the batch.
    #[test]
    fn a_batch_reads_back_to_the_same_effect(data in arb_dataset(Pool::default())) {
        let (mut direct, mut logged) = (TeamData::new(), TeamData::new());
        for (i, batch) in data.parsed().iter().enumerate() {
            let now = Timestamp(1_746_000_000_000_000 + i as i64 * 1_000_000);
            let batch = direct.prepare(batch, now).expect("consistent").into_owned();
            direct.apply(&batch);
            let back = decode_batch(&encode_batch(&batch)).expect("a batch reads back");
            prop_assert!(std::ptr::eq(back.kind, batch.kind));
            logged.apply(&back);
        }
        same_records(&direct, &logged)?;
    }

    /// Records pushed into builders and installed without being written (as the
    /// PostgreSQL store's cache loads a team): the same team, and its heap counted.
    #[test]
    fn a_team_built_from_builders_is_the_same_team(data in arb_dataset(Pool::default())) {
        let mut team = TeamData::new();
        apply_from(&mut team, &data, 0);
        let mut built = TeamData::new();
        for kind in TeamData::segment_kinds() {
            let mut b = SegmentBuilder::new(kind);
            for r in team.records(kind) {
                b.push(r.clone());
            }
            prop_assert_eq!(b.rows(), team.len(kind));
            if kind.is_usage() && b.rows() > 0 {
                prop_assert!(b.heap_bytes() > 0);
            }
            if b.rows() > 0 {
                built.install(b.into_segment());
            }
        }
        same_records(&team, &built)?;
        prop_assert_eq!(built.usage_heap_bytes() > 0, team.usage_rows() > 0);
    }

    /// Any one changed byte is refused by the checksum, whole; nothing panics.
    #[test]
    fn a_changed_byte_is_refused(data in arb_dataset(Pool::default()), at in any::<usize>(), bit in 0u8..8) {
        let mut team = TeamData::new();
        apply_from(&mut team, &data, 0);
        for kind in TeamData::segment_kinds() {
            if let Some(mut bytes) = team.segment(kind) {
                let i = at % bytes.len();
                bytes[i] ^= 1 << bit;
                let mut t = TeamData::new();
                prop_assert!(t.load_segment(&bytes).is_err());
                prop_assert!(decode_batch(&bytes).is_err());
                prop_assert!(t.is_empty());
            }
        }
    }
}

fn autocomplete(n: usize) -> Batch {
    let recs = (0..n)
        .map(|i| {
            serde_json::json!({"api_key": format!("k{}", i % 7), "hour": Timestamp(1_746_057_600_000_000 + i as i64 * MICROS_PER_HOUR).to_rfc3339(),
                "language": "rust", "ide": "vscode", "version": "1.2.3",
                "num_acceptances": i, "num_lines_accepted": 2 * i, "num_bytes_accepted": 70_000 * i as i64})
        })
        .collect::<Vec<_>>();
    let records = recs
        .iter()
        .map(|v| parse_record(&records::AUTOCOMPLETE, v, &JsonPath::root()).expect("valid"))
        .collect();
    Batch {
        kind: &records::AUTOCOMPLETE,
        records,
    }
}

/// The bytes with their checksum made to match again, as a hand edit could.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    let n = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..n]);
    bytes[n..].copy_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn format_and_checksum_errors_say_what_they_are() {
    let seg = encode_batch(&autocomplete(50));
    assert_eq!(decode_batch(&seg).map(|b| b.records.len()), Ok(50));
    let mut newer = seg.clone();
    newer[4] = 2;
    assert_eq!(
        decode_batch(&resealed(newer)).err(),
        Some(SegmentError::Format(2))
    );
    let mut flipped = seg.clone();
    flipped[20] ^= 0x10;
    assert_eq!(decode_batch(&flipped).err(), Some(SegmentError::Checksum));
    assert_eq!(decode_batch(b"").err(), Some(SegmentError::Checksum));
    assert_eq!(
        decode_batch(&seg[..seg.len() - 1]).err(),
        Some(SegmentError::Checksum)
    );
    let mut billing = seg.clone();
    // "autocomplete" renamed in place to a kind of the same length that is no team data.
    let at = 7;
    billing[at..at + 12].copy_from_slice(b"notakindname");
    assert_eq!(
        decode_batch(&resealed(billing)).err(),
        Some(SegmentError::Malformed(
            "`notakindname` is no kind of team data".into()
        ))
    );
}

/// A valid checksum over values no record may hold (a bug or a hand edit that also fixed
/// the checksum) is refused with the column and the rule, never loaded.
#[test]
fn values_that_break_the_ingest_rules_are_refused() {
    let mut t = Table::new(&records::AUTOCOMPLETE);
    for r in &autocomplete(3).records {
        t.upsert(r);
    }
    // Year 10000 in the hour column.
    let hour = t.kind.position("hour").unwrap();
    t.columns[hour]
        .data
        .set(2, Timestamp::MAX.0 / MICROS_PER_HOUR + 1);
    let err = decode_batch(&encode_table(&t)).unwrap_err();
    assert_eq!(
        err,
        bad("autocomplete.hour row 2 holds a time out of range")
    );
    // A negative count.
    let mut t = Table::new(&records::AUTOCOMPLETE);
    for r in &autocomplete(3).records {
        t.upsert(r);
    }
    let n = t.kind.position("num_bytes_accepted").unwrap();
    t.columns[n].data.set(1, -5);
    assert_eq!(
        decode_batch(&encode_table(&t)).unwrap_err(),
        bad("autocomplete.num_bytes_accepted row 1 holds a negative count")
    );
    // A code past the dictionary.
    let mut t = Table::new(&records::AUTOCOMPLETE);
    for r in &autocomplete(3).records {
        t.upsert(r);
    }
    let ide = t.kind.position("ide").unwrap();
    t.columns[ide].data.set(0, 9);
    assert_eq!(
        decode_batch(&encode_table(&t)).unwrap_err(),
        bad("autocomplete.ide row 0 has code 9 of a 1-value dictionary")
    );
}

/// Times in row order and repeated texts compress to almost nothing: of 16 bytes a row
/// of packed values, the 8 of the counts (which grow with every row here, so they do not
/// compress) are most of what is left.
#[test]
fn ordered_rows_compress() {
    let seg = encode_batch(&autocomplete(10_000));
    assert!(seg.len() < 10_000 * 9, "{} bytes", seg.len());
    assert_eq!(
        decode_batch(&seg).unwrap().records,
        autocomplete(10_000).records
    );
}
