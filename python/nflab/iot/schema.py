"""The signaling message schema and the dialog types of seed 003, Table 4.1.

A message row: ``device`` (u32), ``t_ms`` (i64, ms since the Unix epoch, UTC),
``op`` (u8, MAP operation code or GTPv1 message type), ``dir`` (u8, 0 request,
1 response) and ``result`` (u8, 0 success, 1 error, 2 reject; 0 on requests).
"""

from __future__ import annotations

import pyarrow as pa

MESSAGE_SCHEMA = pa.schema(
    [
        ("device", pa.uint32()),
        ("t_ms", pa.int64()),
        ("op", pa.uint8()),
        ("dir", pa.uint8()),
        ("result", pa.uint8()),
    ]
)

REQUEST, RESPONSE = 0, 1
OK, ERROR, REJECT = 0, 1, 2

# Opcodes (Table 4.1): MAP operations answer with the same code, GTPv1 with the next one.
SAI, UL, CL, ISD, UL_GPRS = 56, 2, 3, 7, 23
PDP_CREATE, PDP_UPDATE, PDP_DELETE = 16, 18, 20

# A dialog opens with one of these requests; insertSubscriberData (7) only
# appears inside UL / UL_GPRS.
DIALOG_NAME = {
    SAI: "SAI",
    UL: "UL",
    UL_GPRS: "UL_GPRS",
    CL: "CL",
    PDP_CREATE: "PDP_CREATE",
    PDP_UPDATE: "PDP_UPDATE",
    PDP_DELETE: "PDP_DELETE",
}
RESPONSE_OP = {SAI: SAI, UL: UL, UL_GPRS: UL_GPRS, CL: CL, PDP_CREATE: 17, PDP_UPDATE: 19, PDP_DELETE: 21}
OPENING_OPS = sorted(DIALOG_NAME)
WITH_ISD = (UL, UL_GPRS)

# Dialog outcomes and the type suffix they give (SAI, SAI_ERROR, SAI_REJECT).
OUTCOMES = ("SUCCESS", "ERROR", "REJECT")
SUFFIX = {"SUCCESS": "", "ERROR": "_ERROR", "REJECT": "_REJECT"}
# A dialog that does not start with an opening request (a response without its request).
ORPHAN = "OTHER"

# Planted device classes of the generator, and the cluster names of the analysis.
CLASSES = ("non_periodic", "semi_periodic", "periodic", "high_error", "high_reject")

# Seed 003 §4.2.5: synchronised when the maximum minute-of-hour density of
# PDP_CREATE dialogs is at least 0.075, among devices with at least 30 sequences.
SYNC_DENSITY = 0.075
SYNC_MIN_SEQUENCES = 30
# Periodicity: the three largest autocorrelations over lags 1..1500 minutes.
ACF_MAX_LAG = 1500
ACF_TOP = 3
