"""The implementation of ``mooncake.structured_object_store`` (that module is its public face
and lists what is where). Private: names here may change with the implementation."""
