"""Error classes of the soak: what a client saw, as the driver exception's class and the server's
error code, so that the run through autoprep and the direct run can be compared class by class.

    classify(exc) -> "WriteTimeout 0x1100 SIMPLE"      a server error the driver turned into an
                                                       exception (write type for write errors)
                     "Overloaded 0x1001"               a server error raised as the message itself
                     "OperationTimedOut"               a client-side error: no server code
                     "NoHostAvailable[ConnectionShutdown; Overloaded 0x1001]"
                                                       every host failed: the distinct classes of
                                                       the per-host errors, sorted

Never the message text: it can hold literal values (the rules forbid user data in reports).
"""

from cassandra import WriteType
from cassandra.protocol import ErrorMessage

# The exceptions the driver raises in place of a server ERROR (ErrorMessage.to_exception), by
# class name, with the protocol's error code (native_protocol_v5.spec section 8).
SERVER_CODES = {
    "Unavailable": 0x1000,
    "WriteTimeout": 0x1100,
    "ReadTimeout": 0x1200,
    "ReadFailure": 0x1300,
    "FunctionFailure": 0x1400,
    "WriteFailure": 0x1500,
    "CDCWriteFailure": 0x1600,
    "Unauthorized": 0x2100,
    "InvalidRequest": 0x2200,
    "AlreadyExists": 0x2400,
}

# ErrorMessage subclasses named as the protocol names them, not as the driver's Python class.
MESSAGE_NAMES = {
    0x0000: "ServerError",
    0x000A: "ProtocolError",
    0x0100: "BadCredentials",
    0x1001: "Overloaded",
    0x1002: "IsBootstrapping",
    0x1003: "TruncateError",
    0x1700: "CasWriteUnknown",
    0x2000: "SyntaxError",
    0x2300: "ConfigurationError",
    0x2500: "Unprepared",
}


def classify(exc):
    """The error class of an exception a driver call raised (see the module doc)."""
    name = type(exc).__name__
    if name == "NoHostAvailable":
        inner = sorted({classify(e) for e in (getattr(exc, "errors", None) or {}).values()})
        return f"NoHostAvailable[{'; '.join(inner)}]"
    if isinstance(exc, ErrorMessage):
        code = getattr(exc, "code", None)
        if code is None:
            return name
        return f"{MESSAGE_NAMES.get(code, name)} 0x{code:04x}"
    code = SERVER_CODES.get(name)
    if code is None:
        return name
    write_type = getattr(exc, "write_type", None)
    if write_type is not None:
        # An int in the driver's exception; named as the protocol names it.
        wt = WriteType.value_to_name.get(write_type, str(write_type)) \
            if isinstance(write_type, int) else str(write_type)
        return f"{name} 0x{code:04x} {wt}"
    return f"{name} 0x{code:04x}"


def extra_classes(through, direct):
    """The classes seen through autoprep and never in the direct run (sorted)."""
    return sorted(set(through) - set(direct))
