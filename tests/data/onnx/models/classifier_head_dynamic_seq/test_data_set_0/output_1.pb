B
token_sumsJÀaí½