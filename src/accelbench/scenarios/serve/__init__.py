"""The serve scenario: streamed requests to a running OpenAI-compatible server, timed on the
client. A client scenario: no model is built, fed or checked here, and the platform is the
server's, as the user names it.

Its knobs (settings.py) and record (record.py) are data; plugin.py is what the core reads of it;
measure.py measures, and endpoint.py speaks the protocol."""

from accelbench.scenarios.serve.record import ServedRequest, ServeMetrics, ServeTrial
from accelbench.scenarios.serve.settings import SLO_PRESETS, ServeSettings

__all__ = ["SLO_PRESETS", "ServeMetrics", "ServeSettings", "ServeTrial", "ServedRequest"]
