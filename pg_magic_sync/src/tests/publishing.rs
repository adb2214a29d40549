//! Publishing with a transport the worker pushes to (sql/publish.sql),
//! inside a backend: what is due goes per replica in order, a failure
//! holds back its own replica only, and a message refused for good again
//! and again provisions the replica again with an alarm.

#[pgrx::pg_schema]
#[allow(clippy::module_inception)]
mod tests {
    use pgrx::prelude::*;

    use crate::error::Error;
    use crate::publish::outbox::{self, Outcome, SendFailure};

    const A: &str = "00000000-0000-0000-0000-00000000000a";
    const B: &str = "00000000-0000-0000-0000-00000000000b";

    /// Two replicas, each with an outbox of three messages; A's begins a
    /// snapshot at position 1.
    const OUTBOXES: &str = "
        INSERT INTO sync.replicas (id, live, provision, snapshot_sequence) VALUES
            ('00000000-0000-0000-0000-00000000000a', true, false, 1),
            ('00000000-0000-0000-0000-00000000000b', true, false, NULL);
        INSERT INTO sync.outbox (replica, position, id, kind, head)
        SELECT r, p, r || '-' || p, 'filed', '\\x'
          FROM unnest('{00000000-0000-0000-0000-00000000000a,00000000-0000-0000-0000-00000000000b}'::uuid[]) AS r,
               generate_series(1, 3) AS p;
    ";

    fn ids_due() -> Vec<(String, Vec<String>, bool)> {
        outbox::due(10)
            .into_iter()
            .map(|due| {
                let begins = due.messages.first().is_some_and(|m| m.begins_snapshot);
                (
                    due.replica.to_string(),
                    due.messages.into_iter().map(|m| m.id).collect(),
                    begins,
                )
            })
            .collect()
    }

    fn failed(replica: &str, message: &str, for_good: bool) -> usize {
        outbox::record(&[Outcome {
            replica: replica.parse().unwrap(),
            taken: Vec::new(),
            failed: Some(SendFailure {
                message: message.to_owned(),
                error: Error::Transport {
                    transient: !for_good,
                    stream_missing: false,
                    what: "told no".to_owned(),
                },
            }),
        }])
    }

    fn retry_in(replica: &str) -> f64 {
        Spi::get_one::<f64>(&format!(
            "SELECT extract(epoch FROM retry_at - now())::float8 FROM sync.sends WHERE replica = '{replica}'"
        ))
        .unwrap()
        .unwrap()
    }

    #[pg_test]
    fn what_is_due_goes_per_replica_in_order_and_marks_where_a_snapshot_begins() {
        Spi::run(OUTBOXES).unwrap();
        let due = ids_due();
        assert_eq!(due.len(), 2);
        assert_eq!(
            due[0].1,
            [format!("{A}-1"), format!("{A}-2"), format!("{A}-3")]
        );
        assert!(due[0].2, "A's first message begins its snapshot");
        assert!(!due[1].2);
    }

    #[pg_test]
    fn what_the_transport_took_is_due_no_more_and_the_rest_stays_first() {
        Spi::run(OUTBOXES).unwrap();
        outbox::record(&[Outcome {
            replica: A.parse().unwrap(),
            taken: vec![format!("{A}-1")],
            failed: None,
        }]);
        let due = ids_due();
        assert_eq!(due[0].1, [format!("{A}-2"), format!("{A}-3")]);
        assert_eq!(due[1].1.len(), 3);
    }

    /// The answers (Filed) of replica A left in the outbox.
    fn answers_kept() -> i64 {
        Spi::get_one::<i64>(&format!(
            "SELECT count(*) FROM sync.outbox WHERE replica = '{A}' AND kind = 'filed'"
        ))
        .unwrap()
        .unwrap()
    }

    #[pg_test]
    fn a_published_answer_stays_until_the_replica_applied_a_message_after_it_or_for_an_hour() {
        Spi::run(OUTBOXES).unwrap();
        outbox::record(&[Outcome {
            replica: A.parse().unwrap(),
            taken: vec![format!("{A}-1"), format!("{A}-2"), format!("{A}-3")],
            failed: None,
        }]);
        let checks = "SELECT sync_internal.outbox_checks(1000, 1000000, 3600)";
        Spi::run(checks).unwrap();
        assert_eq!(
            answers_kept(),
            3,
            "a queue taking over would hand them over"
        );

        // A applied a message written after the first two: it was handed
        // those on the way.
        let epoch = "00000000-0000-0000-0000-0000000000e1";
        Spi::run(&format!(
            "UPDATE sync.replicas SET epoch = '{epoch}', applied_epoch = '{epoch}',              applied_sequence = 2 WHERE id = '{A}'"
        ))
        .unwrap();
        Spi::run(checks).unwrap();
        assert_eq!(answers_kept(), 1);

        // An hour on, the replica has sent its upload again and been
        // answered again.
        Spi::run("UPDATE sync.outbox SET written_at = now() - interval '61 minutes'").unwrap();
        Spi::run(checks).unwrap();
        assert_eq!(answers_kept(), 0);
    }

    #[pg_test]
    fn a_failed_send_holds_back_its_own_replica_only_for_a_backoff_that_grows() {
        Spi::run(OUTBOXES).unwrap();
        assert_eq!(failed(A, &format!("{A}-1"), false), 0);
        let first = retry_in(A);
        assert!((0.05..=0.2).contains(&first), "{first}");
        let due = ids_due();
        assert_eq!(due.len(), 1, "A waits out its backoff");
        assert_eq!(due[0].0, B);
        failed(A, &format!("{A}-1"), false);
        assert!(retry_in(A) > first, "the backoff doubles");
        let last_error = Spi::get_one::<String>(&format!(
            "SELECT last_error FROM sync.sends WHERE replica = '{A}'"
        ));
        assert_eq!(last_error, Ok(Some("told no".to_owned())));

        // A send that gets through clears it.
        Spi::run("UPDATE sync.sends SET retry_at = now()").unwrap();
        outbox::record(&[Outcome {
            replica: A.parse().unwrap(),
            taken: vec![format!("{A}-1")],
            failed: None,
        }]);
        assert_eq!(
            Spi::get_one::<i64>("SELECT count(*) FROM sync.sends"),
            Ok(Some(0))
        );
    }

    #[pg_test]
    fn a_message_refused_for_good_three_times_provisions_its_replica_again_with_an_alarm() {
        Spi::run(OUTBOXES).unwrap();
        let message = format!("{A}-1");
        assert_eq!(failed(A, &message, true), 0);
        assert!(retry_in(A) >= 59.0, "a refusal waits a minute");
        assert_eq!(failed(A, &message, true), 0);
        // Another message refused counts afresh; the network, not at all.
        assert_eq!(failed(A, &format!("{A}-2"), true), 0);
        assert_eq!(failed(A, &format!("{A}-2"), false), 0);
        assert_eq!(failed(A, &message, true), 0);
        assert_eq!(failed(A, &message, true), 0);
        assert_eq!(failed(A, &message, true), 1);
        assert_eq!(
            Spi::get_one::<bool>(&format!(
                "SELECT provision FROM sync.replicas WHERE id = '{A}'"
            )),
            Ok(Some(true))
        );
        let alarm = Spi::get_one::<String>("SELECT what FROM sync.alarms")
            .unwrap()
            .unwrap();
        assert!(alarm.contains("refused"), "{alarm}");
    }

    #[pg_test]
    fn the_nats_settings_default_to_the_conventions_both_halves_share() {
        use magic_sync_proto::nats_subjects as subjects;
        assert_eq!(
            Spi::get_one::<String>("SHOW magic_sync.nats_subjects"),
            Ok(Some(subjects::DEFAULT_PREFIX.to_owned()))
        );
        assert_eq!(
            Spi::get_one::<String>("SHOW magic_sync.nats_down_stream"),
            Ok(Some(subjects::DOWN_STREAM.to_owned()))
        );
        assert_eq!(
            Spi::get_one::<String>("SHOW magic_sync.nats_up_stream"),
            Ok(Some(subjects::UP_STREAM.to_owned()))
        );
    }
}
