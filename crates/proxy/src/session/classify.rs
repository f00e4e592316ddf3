//! What the proxy reads a client request for, decided from facts read once into plain values:
//! [`plan`] from the opcode and the connection's state (before the body is read), then
//! [`text_plan`] for a request with CQL text once the topology check has run. Both are pure
//! matches, unit-tested below without a server.

use autoprep_protocol::envelope::Opcode;

/// A request's facts before its body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Facts {
    pub(super) opcode: Opcode,
    /// Rewriting is on and the connection is authenticated (see `Conn::ready`).
    pub(super) rewrite: bool,
    /// The client prepared statements with literals inline (their EXECUTEs run as the shape).
    pub(super) literals_held: bool,
    /// Routing may send a client's own prepared statement to a replica.
    pub(super) may_route: bool,
    /// A topology read was prepared (its EXECUTEs' answers are rewritten).
    pub(super) topology_prepared: bool,
}

/// What [`plan`] decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// An opcode Cassandra does not know: the proxy answers it (see `request::classify`).
    Unknown,
    /// Read for nothing: home as sent, the body unread.
    AsSent,
    /// An EXECUTE or BATCH of the client's prepared statements: run as the shape
    /// (`literal_execute`), or routed (`route_client`); if neither applies, `then_text`
    /// says whether it is looked at as text (a topology read, a BATCH to rewrite).
    Prepared {
        literal_execute: bool,
        route_client: bool,
        then_text: bool,
    },
    /// CQL text to look at (QUERY, PREPARE, a BATCH to rewrite) or an EXECUTE that may read
    /// the topology.
    Text,
}

/// What to read a request for.
pub(super) fn plan(f: &Facts) -> Plan {
    let Facts {
        opcode,
        rewrite,
        literals_held,
        may_route,
        topology_prepared,
    } = *f;
    if opcode.0 > Opcode::AUTH_SUCCESS.0 {
        return Plan::Unknown;
    }
    let (literal_execute, route_client, text) = match opcode {
        Opcode::QUERY | Opcode::PREPARE => return Plan::Text,
        Opcode::EXECUTE => (
            rewrite && literals_held,
            rewrite && may_route,
            topology_prepared,
        ),
        Opcode::BATCH => (false, rewrite && may_route, rewrite),
        _ => return Plan::AsSent,
    };
    match (literal_execute || route_client, text) {
        (true, then_text) => Plan::Prepared {
            literal_execute,
            route_client,
            then_text,
        },
        (false, true) => Plan::Text,
        (false, false) => Plan::AsSent,
    }
}

/// A request's facts once its text was looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TextFacts {
    pub(super) opcode: Opcode,
    pub(super) rewrite: bool,
    /// `--prepare-literals`.
    pub(super) prepare_literals: bool,
    /// Routing is on (a client's PREPARE is remembered for routing its EXECUTEs).
    pub(super) routing: bool,
    /// The request reads the topology (its answer is rewritten at home).
    pub(super) topology: bool,
    /// The body could be read (decompressed).
    pub(super) body: bool,
}

/// What [`text_plan`] decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TextPlan {
    /// A client's PREPARE that may carry literals inline (see `rewrite::literal_prepare`).
    LiteralPrepare,
    /// The rewrite decides (a QUERY or BATCH).
    Decide,
    /// Home as sent; `client_prepare`: a PREPARE whose answer routing remembers.
    AsSent { client_prepare: bool },
}

/// What to do with a request that has CQL text.
pub(super) fn text_plan(f: &TextFacts) -> TextPlan {
    match f.opcode {
        Opcode::PREPARE if f.rewrite && f.prepare_literals && !f.topology && f.body => {
            TextPlan::LiteralPrepare
        }
        Opcode::PREPARE => TextPlan::AsSent {
            client_prepare: !f.topology && f.routing,
        },
        Opcode::QUERY | Opcode::BATCH if f.rewrite => TextPlan::Decide,
        _ => TextPlan::AsSent {
            client_prepare: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(opcode: Opcode) -> Facts {
        Facts {
            opcode,
            rewrite: true,
            literals_held: false,
            may_route: false,
            topology_prepared: false,
        }
    }

    #[test]
    fn an_unknown_opcode_is_answered() {
        assert_eq!(plan(&facts(Opcode(0x7f))), Plan::Unknown);
    }

    #[test]
    fn text_opcodes_are_read_as_text_whatever_the_state() {
        for op in [Opcode::QUERY, Opcode::PREPARE] {
            let f = Facts {
                rewrite: false,
                ..facts(op)
            };
            assert_eq!(plan(&f), Plan::Text);
        }
    }

    #[test]
    fn a_plain_execute_is_read_for_nothing() {
        assert_eq!(plan(&facts(Opcode::EXECUTE)), Plan::AsSent);
        // Literals held or routing only count once the connection may rewrite.
        let f = Facts {
            rewrite: false,
            literals_held: true,
            may_route: true,
            ..facts(Opcode::EXECUTE)
        };
        assert_eq!(plan(&f), Plan::AsSent);
        for op in [Opcode::STARTUP, Opcode::OPTIONS, Opcode::REGISTER] {
            assert_eq!(plan(&facts(op)), Plan::AsSent);
        }
    }

    #[test]
    fn an_execute_is_read_for_literals_routing_or_topology() {
        let f = Facts {
            literals_held: true,
            topology_prepared: true,
            ..facts(Opcode::EXECUTE)
        };
        assert_eq!(
            plan(&f),
            Plan::Prepared {
                literal_execute: true,
                route_client: false,
                then_text: true
            }
        );
        let f = Facts {
            topology_prepared: true,
            ..facts(Opcode::EXECUTE)
        };
        assert_eq!(plan(&f), Plan::Text);
    }

    #[test]
    fn a_batch_is_routed_or_rewritten() {
        assert_eq!(plan(&facts(Opcode::BATCH)), Plan::Text);
        let f = Facts {
            may_route: true,
            ..facts(Opcode::BATCH)
        };
        assert_eq!(
            plan(&f),
            Plan::Prepared {
                literal_execute: false,
                route_client: true,
                then_text: true
            }
        );
        let f = Facts {
            rewrite: false,
            may_route: true,
            ..facts(Opcode::BATCH)
        };
        assert_eq!(plan(&f), Plan::AsSent);
    }

    fn text(opcode: Opcode) -> TextFacts {
        TextFacts {
            opcode,
            rewrite: true,
            prepare_literals: true,
            routing: true,
            topology: false,
            body: true,
        }
    }

    #[test]
    fn a_prepare_is_a_literal_prepare_unless_it_reads_the_topology() {
        assert_eq!(text_plan(&text(Opcode::PREPARE)), TextPlan::LiteralPrepare);
        let f = TextFacts {
            topology: true,
            ..text(Opcode::PREPARE)
        };
        assert_eq!(
            text_plan(&f),
            TextPlan::AsSent {
                client_prepare: false
            }
        );
        for f in [
            TextFacts {
                prepare_literals: false,
                ..text(Opcode::PREPARE)
            },
            TextFacts {
                body: false,
                ..text(Opcode::PREPARE)
            },
            TextFacts {
                rewrite: false,
                ..text(Opcode::PREPARE)
            },
        ] {
            assert_eq!(
                text_plan(&f),
                TextPlan::AsSent {
                    client_prepare: true
                }
            );
        }
    }

    #[test]
    fn queries_and_batches_are_decided_only_when_rewriting() {
        for op in [Opcode::QUERY, Opcode::BATCH] {
            assert_eq!(text_plan(&text(op)), TextPlan::Decide);
            let f = TextFacts {
                rewrite: false,
                ..text(op)
            };
            assert_eq!(
                text_plan(&f),
                TextPlan::AsSent {
                    client_prepare: false
                }
            );
        }
        // An EXECUTE of a topology read is sent as it is, its answer rewritten.
        assert_eq!(
            text_plan(&text(Opcode::EXECUTE)),
            TextPlan::AsSent {
                client_prepare: false
            }
        );
    }
}
