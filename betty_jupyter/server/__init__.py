"""Betty's Jupyter server extension: REST and WebSocket handlers under ``/betty/api/``."""
