"""onnxrt-backend-dev: time, memory and profile monitoring for Python code."""

__version__ = "0.1.0"
