"""The gateway's head starts (docs/relay.md, "Head start"): on when a relay is configured,
the agents known and `PERDURE_HEAD_START` is not turned off."""

from activities.head_start import HeadStart, early_config
from activities.providers.config import ProviderConfig
from activities.providers.registry import import_adapters
from activities.workspace_tools import WorkspaceTools
from perdure.agents_registry import AgentRegistry
from perdure.runtime.services import Services
from perdure.runtime.settings import Settings


def head_start_config(settings: Settings) -> ProviderConfig | None:
    """What this process's head starts are sent with; None when it sends none (no relay, or
    `PERDURE_HEAD_START=false`)."""
    return early_config(settings.provider_config()) if settings.head_start else None


def start_heads(services: Services, agents: AgentRegistry) -> None:
    """Give the services' gateway a head start, when it can have one."""
    settings = services.settings
    config = head_start_config(settings)
    if config is None:
        return
    # Imported now, not by the first message: an SDK's import holds the event loop.
    import_adapters(agents.models(settings.model), config)
    head_start = HeadStart(
        agents=agents,
        default_model=settings.model,
        config=config,
        workspace=WorkspaceTools(
            db=services.db,
            limits=settings.workspace_limits(),
            blobs=settings.workspace_blobs(),
        ),
    )
    services.head_start = head_start
    services.closers.append(head_start.close)
