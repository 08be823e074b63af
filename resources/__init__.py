"""Files lexmem ships beside its code: the embedded model's tokenizer, icons, style sheets.

Installed as the ``lexmem_resources`` package so they are found the same way
from a checkout, a wheel and a bundle.
"""
