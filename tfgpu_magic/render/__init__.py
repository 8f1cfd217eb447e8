"""The renderers: text (100 columns) and HTML of the snapshot, the live model's sections and placement capture.

Functions over data the core gathered; everything that comes from data is escaped. Imports only ``core/``.
"""
